/**
 * The overlap a secret rotation may keep (a webhook's signing secret, an OAuth client's secret):
 * how long the secret it replaced goes on working beside the new one, at most a week, so that a
 * receiver or a client can switch over without a moment of refusals.
 */
export const MAX_PREVIOUS_SECRET_SECONDS = 7 * 24 * 3600;
