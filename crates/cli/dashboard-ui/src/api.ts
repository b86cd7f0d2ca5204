// The server's API: plain requests, and the live streams of JSON lines (grpc-gateway's
// format: one `{"result": ...}` per line), reopened whenever they drop.

import type { Settings } from './types';

/// A dashboard with logins answers 401 once the session is gone (expired, logged out, or a
/// cookie it did not issue): the login page then brings the user back here.
function loginIfAsked(response: Response): void {
  if (response.status !== 401) return;
  location.assign(`/login?next=${encodeURIComponent(location.pathname)}`);
}

export async function getJson<T>(path: string): Promise<T> {
  const response = await fetch(path);
  loginIfAsked(response);
  if (!response.ok) throw new Error(await failure(response));
  return (await response.json()) as T;
}

/// A change; the answer's error message when it fails.
export async function put(path: string, body: unknown = {}): Promise<void> {
  const response = await fetch(path, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  loginIfAsked(response);
  if (!response.ok) throw new Error(await failure(response));
}

async function failure(response: Response): Promise<string> {
  try {
    const body = (await response.json()) as { message?: string };
    return body.message || `${response.status} ${response.statusText}`;
  } catch {
    return `${response.status} ${response.statusText}`;
  }
}

export function settings(): Promise<Settings> {
  return getJson<Settings>('/api/v1/settings');
}

/// Longest silence before a stream is taken for dead: the server sends an empty line every
/// 15 s on a quiet stream.
const SILENCE = 40_000;

/// Reads the stream at `path`, calling `onResult` with each line's `result`, and reopens it
/// with a growing delay when it ends or fails, until the returned function is called.
/// `onState` says whether the stream is open.
export function watch(
  path: string,
  onResult: (result: unknown) => void,
  onState: (open: boolean) => void,
): () => void {
  let stopped = false;
  let controller: AbortController | undefined;
  const run = async () => {
    let delay = 500;
    while (!stopped) {
      controller = new AbortController();
      let silence: number | undefined;
      const quiet = () => {
        window.clearTimeout(silence);
        silence = window.setTimeout(() => controller?.abort(), SILENCE);
      };
      try {
        quiet();
        const response = await fetch(path, { signal: controller.signal });
        loginIfAsked(response);
        if (!response.ok || !response.body) throw new Error(`${response.status}`);
        onState(true);
        delay = 500;
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          quiet();
          buffer += value;
          let end: number;
          while ((end = buffer.indexOf('\n')) >= 0) {
            const line = buffer.slice(0, end).trim();
            buffer = buffer.slice(end + 1);
            if (line) onResult((JSON.parse(line) as { result: unknown }).result);
          }
        }
      } catch {
        // Reopened below: a dropped connection, a restarted server, a silent proxy.
      } finally {
        window.clearTimeout(silence);
      }
      if (stopped) return;
      onState(false);
      await new Promise((resolve) => window.setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 10_000);
    }
  };
  void run();
  return () => {
    stopped = true;
    controller?.abort();
  };
}

/// Shows in the bar whether the page is live.
export function liveState(open: boolean): void {
  const element = document.getElementById('live');
  if (!element) return;
  element.textContent = open ? 'live' : 'reconnecting…';
  element.className = open ? 'live on' : 'live off';
}

export function rolloutsPath(namespace: string): string {
  return `/api/v1/rollouts/${encodeURIComponent(namespace)}`;
}
