// A tiny element builder: the page is small enough that a framework would weigh more than
// the page itself.

type Child = Node | string | number | null | undefined | false | Child[];
type Attrs = Record<string, string | number | boolean | ((event: Event) => void) | undefined>;

export function h(tag: string, attrs: Attrs = {}, ...children: Child[]): HTMLElement {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    if (typeof value === 'function') element.addEventListener(key.replace(/^on/, ''), value);
    else if (value === true) element.setAttribute(key, '');
    else element.setAttribute(key, String(value));
  }
  append(element, children);
  return element;
}

function append(parent: Node, children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(parent, child);
    else parent.appendChild(typeof child === 'object' ? child : document.createTextNode(String(child)));
  }
}

/// Replaces what `parent` shows.
export function show(parent: Element, ...children: Child[]): void {
  parent.replaceChildren();
  append(parent, children);
}

const SVG = 'http://www.w3.org/2000/svg';

export function svg(tag: string, attrs: Record<string, string | number> = {}, ...children: Element[]): SVGElement {
  const element = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) element.setAttribute(key, String(value));
  for (const child of children) element.appendChild(child);
  return element;
}

const ICONS: Record<string, string> = {
  Healthy: '✔',
  Successful: '✔',
  Running: '●',
  Progressing: '◌',
  Pending: '◌',
  Paused: '❚❚',
  Inconclusive: '?',
  Degraded: '✖',
  Failed: '✖',
  Error: '⚠',
  ScaledDown: '○',
};

/// A phase with its icon, coloured by its class.
export function phase(status: string, testid?: string): HTMLElement {
  return h(
    'span',
    { class: `phase phase-${status || 'Unknown'}`, 'data-testid': testid, title: status },
    h('span', { class: 'icon', 'aria-hidden': 'true' }, ICONS[status] ?? '•'),
    ' ',
    status || 'Unknown',
  );
}

let toastTimer: number | undefined;

/// A short message at the bottom of the page.
export function toast(text: string, error = false): void {
  const element = document.getElementById('toast');
  if (!element) return;
  element.textContent = text;
  element.className = error ? 'shown error' : 'shown';
  window.clearTimeout(toastTimer);
  toastTimer = window.setTimeout(() => (element.className = ''), error ? 8000 : 3000);
}
