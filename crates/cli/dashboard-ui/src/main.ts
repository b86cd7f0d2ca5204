// The page's entry: reads the server's settings, then shows the page the path names
// (/rollouts/NS or /rollout/NS/NAME), stopping the previous page's stream on each change.

import { getJson, settings as readSettings } from './api';
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
  if (parts[0] === 'rollout' && parts.length === 3) {
    void showNamespace(parts[1], settings);
    document.title = `${parts[2]} · Sluice Rollouts`;
    stop = rolloutPage(main, parts[1], parts[2], settings);
  } else if (parts[0] === 'rollouts' && parts.length === 2) {
    void showNamespace(parts[1], settings);
    document.title = `${parts[1]} · Sluice Rollouts`;
    stop = listPage(main, parts[1]);
  } else if (parts.length === 0) {
    navigate(`/rollouts/${encodeURIComponent(settings.namespace)}`);
  } else {
    show(main, h('p', {}, 'No such page. ', h('a', { href: '/' }, 'The Rollouts')));
  }
}

/// The namespace in the bar: with -A, a choice among the namespaces that have Rollouts.
async function showNamespace(namespace: string, settings: Settings): Promise<void> {
  const label = document.getElementById('namespace');
  if (!label) return;
  if (!settings.allNamespaces) {
    label.textContent = `namespace ${namespace}`;
    return;
  }
  const info = await getJson<{ availableNamespaces: string[] | null }>('/api/v1/namespace').catch(() => ({ availableNamespaces: [] }));
  const names = [...new Set([namespace, ...(info.availableNamespaces ?? [])])].sort();
  show(
    label,
    'namespace ',
    h(
      'select',
      {
        'aria-label': 'Namespace',
        'data-testid': 'namespace-select',
        onchange: (event: Event) => navigate(`/rollouts/${encodeURIComponent((event.target as HTMLSelectElement).value)}`),
      },
      names.map((n) => h('option', { value: n, selected: n === namespace }, n)),
    ),
  );
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
    const user = document.getElementById('user');
    if (user && settings.user) {
      show(
        user,
        h('span', { 'data-testid': 'user' }, settings.user),
        h('form', { method: 'post', action: '/logout', class: 'logout' }, h('button', { type: 'submit', 'data-testid': 'logout' }, 'Log out')),
      );
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
