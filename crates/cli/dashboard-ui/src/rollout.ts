// One Rollout: its state, actions (each confirmed first; none in read-only mode), steps
// with the current one marked, revisions with their ReplicaSets and pods, AnalysisRuns with
// their measurements, and Experiments. Redrawn from the Rollout's watch stream.

import { getJson, liveState, put, rolloutsPath, watch } from './api';
import { measurementChart } from './chart';
import { confirmAction } from './confirm';
import { h, phase, show, toast } from './dom';
import { images, stepText, weightText } from './list';
import type { AnalysisRunInfo, ReplicaSetInfo, RolloutInfo, Settings, Step } from './types';

export function rolloutPage(main: HTMLElement, namespace: string, name: string, settings: Settings): () => void {
  const base = `${rolloutsPath(namespace)}/${encodeURIComponent(name)}`;
  show(main, h('p', { class: 'muted' }, `Loading ${name}…`));
  let last: RolloutInfo | undefined;
  // `explain`'s answer, read again whenever what the Rollout shows moves on.
  let explained = { key: '', text: '' };
  const explain = (info: RolloutInfo) => {
    const key = info.status === 'Healthy' ? '' : [info.status, info.step, info.message, info.updated, info.available].join('|');
    if (key === explained.key) return;
    explained = { key, text: '' };
    if (!key) return;
    getJson<{ text: string }>(`${base}/explain`)
      .then(({ text }) => {
        if (explained.key !== key) return;
        explained.text = text;
        if (last) render(last);
      })
      .catch(() => {
        // Shown without the answer: the Rollout's own message still says what is going on.
      });
  };
  const act = async (title: string, detail: string, path: string, body: unknown = {}) => {
    if (!(await confirmAction(title, detail, title))) return;
    try {
      await put(`${base}/${path}`, body);
      toast(`${title}: done`);
    } catch (e) {
      toast(`${title} failed: ${(e as Error).message}`, true);
    }
  };
  const render = (info: RolloutInfo) => {
    last = info;
    show(
      main,
      h('p', { class: 'crumbs' }, h('a', { href: `/rollouts/${encodeURIComponent(namespace)}`, 'data-testid': 'back' }, `← Rollouts in ${namespace}`)),
      summary(info),
      explained.text ? h('section', { class: 'explain' }, h('h2', {}, 'What it waits for'), h('pre', { 'data-testid': 'explain' }, explained.text)) : null,
      settings.readOnly ? h('p', { class: 'muted', 'data-testid': 'read-only' }, 'Read-only: this dashboard makes no changes.') : actions(info, act),
      info.steps.length > 0 ? steps(info) : null,
      revisions(info, settings.readOnly, act),
      info.analysisRuns.length > 0 ? h('section', {}, h('h2', {}, 'AnalysisRuns'), info.analysisRuns.map(analysisRun)) : null,
      info.experiments.length > 0 ? experiments(info) : null,
    );
  };
  return watch(
    `${base}/info/watch`,
    (result) => {
      render(result as RolloutInfo);
      explain(result as RolloutInfo);
    },
    (open) => {
      liveState(open);
      if (!open && !last) show(main, h('p', { class: 'muted' }, `Waiting for rollout ${name} in ${namespace}…`));
    },
  );
}

type Act = (title: string, detail: string, path: string, body?: unknown) => Promise<void>;

function summary(info: RolloutInfo): HTMLElement {
  const field = (label: string, value: Node | string, testid?: string) =>
    h('div', { class: 'field' }, h('span', { class: 'label' }, label), h('span', { 'data-testid': testid }, value));
  return h(
    'section',
    { class: 'summary' },
    h('h1', { 'data-testid': 'rollout-name' }, info.objectMeta.name, ' ', phase(info.status, 'phase')),
    info.message ? h('p', { class: 'message', 'data-testid': 'message' }, info.message) : null,
    h(
      'div',
      { class: 'fields' },
      field('Strategy', info.strategy),
      field('Step', stepText(info), 'step'),
      field('Weight', weightText(info), 'weight'),
      field('Replicas', `${info.desired} desired, ${info.current} current, ${info.updated} updated, ${info.ready} ready, ${info.available} available`),
      field('Images', images(info).join(', '), 'rollout-images'),
      field('Restarted', info.restartedAt),
    ),
  );
}

function actions(info: RolloutInfo, act: Act): HTMLElement {
  const name = info.objectMeta.name;
  const button = (label: string, testid: string, onclick: () => void) =>
    h('button', { type: 'button', 'data-testid': testid, onclick }, label);
  const container = h('select', { 'aria-label': 'Container', 'data-testid': 'set-image-container' }, info.containers.map((c) => h('option', { value: c.name }, c.name))) as HTMLSelectElement;
  const image = h('input', { type: 'text', placeholder: 'image:tag', 'aria-label': 'Image', 'data-testid': 'set-image-value' }) as HTMLInputElement;
  const setImage = () => {
    const value = image.value.trim();
    const at = value.lastIndexOf(':');
    if (at <= 0 || at === value.length - 1 || value.slice(at).includes('/')) {
      toast('Give the image as IMAGE:TAG', true);
      return;
    }
    const [repo, tag] = [value.slice(0, at), value.slice(at + 1)];
    const path = `set/${encodeURIComponent(container.value)}/${repo.split('/').map(encodeURIComponent).join('/')}/${encodeURIComponent(tag)}`;
    void act('Set image', `Run ${value} in container ${container.value} of ${name}? This starts an update.`, path);
  };
  return h(
    'section',
    { class: 'actions' },
    button('Promote', 'action-promote', () => void act('Promote', `Leave the current pause or step of ${name} and go on to the next step?`, 'promote')),
    button('Promote full', 'action-promote-full', () => void act('Promote full', `Skip all remaining steps and analysis of ${name} and make the update stable now?`, 'promote', { full: true })),
    button('Abort', 'action-abort', () => void act('Abort', `Abort the update of ${name} and go back to the stable version?`, 'abort')),
    button('Retry', 'action-retry', () => void act('Retry', `Start the aborted update of ${name} again?`, 'retry')),
    button('Restart', 'action-restart', () => void act('Restart', `Restart every pod of ${name}, a few at a time?`, 'restart')),
    button('Pause', 'action-pause', () => void act('Pause', `Pause ${name} where it is, until resumed?`, 'pause')),
    button('Resume', 'action-resume', () => void act('Resume', `Lift the pause you put on ${name}?`, 'resume')),
    h('span', { class: 'set-image' }, container, image, button('Set image', 'action-set-image', setImage)),
  );
}

/// A step in words.
export function describeStep(step: Step): string {
  const [kind, value] = Object.entries(step)[0] ?? ['', undefined];
  const v = value as Record<string, unknown> | number | undefined;
  switch (kind) {
    case 'setWeight':
      return `Set weight ${String(v)}%`;
    case 'pause': {
      const duration = (v as Record<string, unknown> | undefined)?.duration;
      return duration === undefined ? 'Pause until promoted' : `Pause ${String(duration)}${typeof duration === 'number' ? 's' : ''}`;
    }
    case 'analysis': {
      const templates = ((v as Record<string, unknown>)?.templates as { templateName?: string }[] | undefined) ?? [];
      return `Analysis: ${templates.map((t) => t.templateName).join(', ')}`;
    }
    case 'experiment':
      return 'Experiment';
    case 'setCanaryScale':
      return `Set canary scale ${JSON.stringify(v)}`;
    default:
      return `${kind} ${JSON.stringify(v ?? '')}`;
  }
}

function steps(info: RolloutInfo): HTMLElement {
  const current = info.step === '' ? -1 : Number(info.step);
  return h(
    'section',
    {},
    h('h2', {}, 'Steps'),
    h(
      'ol',
      { class: 'steps', 'data-testid': 'steps' },
      info.steps.map((step, i) =>
        h(
          'li',
          {
            class: i < current ? 'done' : i === current ? 'current' : 'todo',
            'aria-current': i === current ? 'step' : undefined,
            'data-testid': i === current ? 'current-step' : 'step-item',
          },
          describeStep(step),
        ),
      ),
    ),
  );
}

function replicaSet(rs: ReplicaSetInfo): HTMLElement {
  const tags = (['stable', 'canary', 'active', 'preview'] as const).filter((t) => rs[t]);
  return h(
    'div',
    { class: 'replicaset', 'data-testid': 'replicaset', 'data-name': rs.objectMeta.name },
    h('div', { class: 'rs-head' }, h('strong', {}, rs.objectMeta.name), ' ', tags.map((t) => h('span', { class: `tag tag-${t}` }, t)), ' ', phase(rs.status), ` ${rs.available}/${rs.replicas} available`),
    h('div', { class: 'muted' }, rs.images.join(', ')),
    h(
      'ul',
      { class: 'pods' },
      rs.pods.map((p) => h('li', { 'data-testid': 'pod' }, phase(p.status), ` ${p.objectMeta.name} · ready ${p.ready} · restarts ${p.restarts}`)),
    ),
  );
}

function revisions(info: RolloutInfo, readOnly: boolean, act: Act): HTMLElement {
  const byRevision = new Map<number, ReplicaSetInfo[]>();
  for (const rs of info.replicaSets) byRevision.set(rs.revision, [...(byRevision.get(rs.revision) ?? []), rs]);
  const ordered = [...byRevision.entries()].sort((a, b) => b[0] - a[0]);
  const newest = ordered[0]?.[0];
  return h(
    'section',
    {},
    h('h2', {}, 'Revisions'),
    ordered.map(([revision, sets]) =>
      h(
        'div',
        { class: 'revision', 'data-testid': 'revision' },
        h(
          'h3',
          {},
          `Revision ${revision}`,
          !readOnly && revision !== newest
            ? h('button', { type: 'button', class: 'small', 'data-testid': `action-undo-${revision}`, onclick: () => void act('Roll back', `Roll ${info.objectMeta.name} back to the pod template of revision ${revision}? This starts an update.`, `undo/${revision}`) }, 'Roll back to this')
            : null,
          !readOnly && revision !== newest
            ? h('button', { type: 'button', class: 'small', 'data-testid': `action-undo-fast-${revision}`, onclick: () => void act('Roll back fast', `Roll ${info.objectMeta.name} back to revision ${revision} at once, skipping its steps, pauses and analyses? For incidents.`, `undo-fast/${revision}`) }, 'Roll back fast')
            : null,
        ),
        sets.map(replicaSet),
      ),
    ),
  );
}

function analysisRun(run: AnalysisRunInfo): HTMLElement {
  return h(
    'div',
    { class: 'analysisrun', 'data-testid': 'analysisrun' },
    h('div', {}, h('strong', {}, run.objectMeta.name), ' ', phase(run.status), ` revision ${run.revision} · ✔ ${run.successful} ✖ ${run.failed} ? ${run.inconclusive} ⚠ ${run.error}`),
    run.successCondition ? h('div', { class: 'muted' }, `Success when ${run.successCondition}`) : null,
    measurementChart(run.nonJobInfo ?? []),
  );
}

function experiments(info: RolloutInfo): HTMLElement {
  return h(
    'section',
    {},
    h('h2', {}, 'Experiments'),
    info.experiments.map((e) =>
      h('div', { class: 'experiment', 'data-testid': 'experiment' }, h('div', {}, h('strong', {}, e.objectMeta.name), ' ', phase(e.status, 'experiment-phase'), ` revision ${e.revision} ${e.message}`), e.replicaSets.map(replicaSet), e.analysisRuns.map(analysisRun)),
    ),
  );
}
