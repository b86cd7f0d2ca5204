// The Rollouts of a namespace as a table, filtered as you type, kept live by the
// namespace's watch stream.

import { getJson, liveState, rolloutsPath, watch } from './api';
import { h, phase, show, toast } from './dom';
import { navigate } from './router';
import type { RolloutInfo } from './types';

interface WatchEvent {
  type: string;
  rolloutInfo: RolloutInfo;
}

export function stepText(info: RolloutInfo): string {
  return info.step !== '' && info.steps.length > 0 ? `${info.step}/${info.steps.length}` : '-';
}

export function weightText(info: RolloutInfo): string {
  if (info.strategy !== 'Canary') return '-';
  return `${info.setWeight || 0}% set, ${info.actualWeight || 0}% actual`;
}

/// Images in use, each once, from the ReplicaSets that have pods or want them.
export function images(info: RolloutInfo): string[] {
  const seen = new Set<string>();
  for (const rs of info.replicaSets) if (rs.replicas > 0 || rs.pods.length > 0) rs.images.forEach((i) => seen.add(i));
  if (seen.size === 0) info.containers.forEach((c) => seen.add(c.image));
  return [...seen];
}

export function listPage(main: HTMLElement, namespace: string): () => void {
  const rollouts = new Map<string, RolloutInfo>();
  let loaded = false;
  const filter = h('input', {
    type: 'search',
    placeholder: 'Filter by name or image',
    'aria-label': 'Filter',
    'data-testid': 'filter',
    oninput: () => render(),
  }) as HTMLInputElement;
  const count = h('span', { class: 'count', 'data-testid': 'count' });
  const body = h('tbody');
  show(
    main,
    h('div', { class: 'toolbar' }, h('h1', {}, `Rollouts in ${namespace}`), filter, count),
    h(
      'table',
      { class: 'rollouts' },
      h('thead', {}, h('tr', {}, ...['Name', 'Strategy', 'Status', 'Step', 'Weight', 'Ready', 'Images'].map((t) => h('th', {}, t)))),
      body,
    ),
  );
  const render = () => {
    const words = filter.value.trim().toLowerCase();
    const shown = [...rollouts.values()]
      .filter((r) => !words || r.objectMeta.name.toLowerCase().includes(words) || images(r).some((i) => i.toLowerCase().includes(words)))
      .sort((a, b) => a.objectMeta.name.localeCompare(b.objectMeta.name));
    count.textContent = loaded ? `${shown.length} of ${rollouts.size}` : 'loading…';
    show(
      body,
      shown.map((r) => {
        const href = `/rollout/${encodeURIComponent(namespace)}/${encodeURIComponent(r.objectMeta.name)}`;
        return h(
          'tr',
          { 'data-testid': 'rollout-row', 'data-name': r.objectMeta.name },
          h('td', {}, h('a', { href, onclick: (e: Event) => { e.preventDefault(); navigate(href); } }, r.objectMeta.name)),
          h('td', {}, r.strategy),
          h('td', {}, phase(r.status)),
          h('td', { 'data-testid': 'row-step' }, stepText(r)),
          h('td', {}, weightText(r)),
          h('td', {}, `${r.available}/${r.desired}`),
          h('td', { class: 'images' }, images(r).map((i) => h('div', {}, i))),
        );
      }),
    );
  };
  const reload = async () => {
    try {
      const list = await getJson<{ rollouts: RolloutInfo[] | null }>(`${rolloutsPath(namespace)}/info`);
      rollouts.clear();
      for (const r of list.rollouts ?? []) rollouts.set(r.objectMeta.name, r);
      loaded = true;
      render();
    } catch (e) {
      toast(`Reading the Rollouts failed: ${(e as Error).message}`, true);
    }
  };
  render();
  // A stream's first lines are every Rollout: drawn once per frame, not once per line, so
  // that a namespace of a thousand Rollouts is drawn a few times rather than a thousand.
  let drawing = false;
  const redraw = () => {
    if (drawing) return;
    drawing = true;
    requestAnimationFrame(() => {
      drawing = false;
      render();
    });
  };
  let opened = false;
  return watch(
    `${rolloutsPath(namespace)}/info/watch`,
    (result) => {
      const event = result as WatchEvent;
      const name = event.rolloutInfo.objectMeta.name;
      if (event.type === 'Deleted') rollouts.delete(name);
      else rollouts.set(name, event.rolloutInfo);
      redraw();
    },
    (open) => {
      liveState(open);
      if (!open) return;
      loaded = true;
      redraw();
      // The stream sends every Rollout when it opens, but not those deleted while it was
      // down: after a reconnection the list is read whole again.
      if (opened) void reload();
      opened = true;
    },
  );
}
