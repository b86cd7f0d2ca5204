// The page's entry: reads the server's settings, then shows the page the path names
// (/rollouts/NS or /rollout/NS/NAME), stopping the previous page's stream on each change.

import { settings as readSettings } from './api';
import { h, show } from './dom';
import { listPage } from './list';
import { rolloutPage } from './rollout';
import { navigate, setRouter } from './router';
import type { Settings } from './types';

let stop: () => void = () => {};

function route(path: string, settings: Settings): void {
  stop();
  stop = () => {};
  const main = document.getElementById('main');
  if (!main) return;
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  const namespaceLabel = document.getElementById('namespace');
  if (parts[0] === 'rollout' && parts.length === 3) {
    if (namespaceLabel) namespaceLabel.textContent = `namespace ${parts[1]}`;
    document.title = `${parts[2]} · Sluice Rollouts`;
    stop = rolloutPage(main, parts[1], parts[2], settings);
  } else if (parts[0] === 'rollouts' && parts.length === 2) {
    if (namespaceLabel) namespaceLabel.textContent = `namespace ${parts[1]}`;
    document.title = `${parts[1]} · Sluice Rollouts`;
    stop = listPage(main, parts[1]);
  } else if (parts.length === 0) {
    navigate(`/rollouts/${encodeURIComponent(settings.namespace)}`);
  } else {
    show(main, h('p', {}, 'No such page. ', h('a', { href: '/' }, 'The Rollouts')));
  }
}

async function start(): Promise<void> {
  const main = document.getElementById('main');
  try {
    const settings = await readSettings();
    const mode = document.getElementById('mode');
    if (mode && settings.readOnly) {
      mode.textContent = 'read-only';
      mode.className = 'badge';
    }
    setRouter((path) => route(path, settings));
    // Links inside the page move without reloading it.
    document.addEventListener('click', (event) => {
      const link = (event.target as Element | null)?.closest?.('a');
      const href = link?.getAttribute('href');
      if (!link || !href || !href.startsWith('/') || event.defaultPrevented || event.ctrlKey || event.metaKey) return;
      event.preventDefault();
      navigate(href);
    });
    route(location.pathname, settings);
  } catch (e) {
    if (main) show(main, h('p', { class: 'error' }, `The dashboard server did not answer: ${(e as Error).message}`));
  }
}

void start();
