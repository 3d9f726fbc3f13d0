/** Driving the service's HTML pages without a browser: follow redirects, read form fields. */
import request from 'supertest';

type Agent = ReturnType<typeof request.agent>;

/**
 * GETs `path` on `base` with `agent` (keeping its cookies) and follows redirects while they stay
 * on `base`; answers the page reached, or where a redirect left to.
 */
export async function browse(agent: Agent, base: string, path: string): Promise<{ page?: string; path: string; leftTo?: string }> {
  let at = path;
  for (let i = 0; i < 10; i++) {
    const res = await agent.get(at);
    if (res.status === 200) return { page: res.text, path: at };
    if (![302, 303].includes(res.status)) throw new Error(`GET ${at}: ${res.status} ${res.text.slice(0, 300)}`);
    const next = new URL(res.headers.location, base);
    if (next.origin !== base) return { path: at, leftTo: next.toString() };
    at = next.pathname + next.search;
  }
  throw new Error('redirect loop');
}

/** The value of a hidden form field. */
export const field = (html: string, name: string) => new RegExp(`name="${name}" value="([^"]*)"`).exec(html)?.[1] ?? '';
