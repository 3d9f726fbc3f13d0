/** A minimal server-sent events client over fetch: collects parsed events and comments. */
export interface SseEvent {
  id?: string;
  event?: string;
  data: string;
}

export class SseClient {
  readonly events: SseEvent[] = [];
  readonly comments: string[] = [];
  status = 0;
  contentType = '';
  cacheControl = '';
  closed = false;
  private readonly abort = new AbortController();

  static async open(url: string, headers: Record<string, string>): Promise<SseClient> {
    const client = new SseClient();
    const res = await fetch(url, { headers, signal: client.abort.signal });
    client.status = res.status;
    client.contentType = res.headers.get('content-type') ?? '';
    client.cacheControl = res.headers.get('cache-control') ?? '';
    if (res.ok && res.body) void client.read(res.body);
    else client.closed = true;
    return client;
  }

  private async read(body: ReadableStream<Uint8Array>): Promise<void> {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
          this.parse(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
        }
      }
    } catch {
      // aborted by close()
    }
    this.closed = true;
  }

  private parse(block: string): void {
    const event: SseEvent = { data: '' };
    let hasField = false;
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) this.comments.push(line.slice(1).trim());
      const m = /^(id|event|data): ?(.*)$/.exec(line);
      if (!m) continue;
      hasField = true;
      if (m[1] === 'data') event.data += (event.data ? '\n' : '') + m[2];
      else event[m[1] as 'id' | 'event'] = m[2];
    }
    if (hasField && (event.event || event.data)) this.events.push(event);
  }

  /** Events with a name (not the `retry:` preamble), parsed. */
  named(): Array<{ id?: string; event: string; body: any }> {
    return this.events.filter((e) => e.event).map((e) => ({ id: e.id, event: e.event!, body: JSON.parse(e.data) }));
  }

  close(): void {
    this.abort.abort();
  }
}
