// The measurements of an AnalysisRun drawn over time, one line per metric; values that are
// not numbers (a JSON result) are left out of the line.

import { h, svg } from './dom';
import type { Measurement } from './types';

const WIDTH = 360;
const HEIGHT = 120;
const PAD = 24;
const COLOURS = ['#2f6fde', '#d9822b', '#23925b', '#a846a0'];

export function measurementChart(measurements: Measurement[]): HTMLElement | null {
  const points = measurements
    .map((m) => ({ metric: m.metricName || 'value', at: Date.parse(m.startedAt ?? ''), value: Number(m.value), status: m.status }))
    .filter((p) => Number.isFinite(p.at) && m(p.value));
  if (points.length === 0) return null;
  const times = points.map((p) => p.at);
  const values = points.map((p) => p.value);
  const [t0, t1] = [Math.min(...times), Math.max(...times)];
  const [v0, v1] = [Math.min(0, ...values), Math.max(...values)];
  const x = (t: number) => PAD + ((t - t0) / (t1 - t0 || 1)) * (WIDTH - 2 * PAD);
  const y = (v: number) => HEIGHT - PAD - ((v - v0) / (v1 - v0 || 1)) * (HEIGHT - 2 * PAD);
  const metrics = [...new Set(points.map((p) => p.metric))];
  const chart = svg('svg', { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, width: WIDTH, height: HEIGHT, class: 'chart', role: 'img' });
  chart.appendChild(svg('line', { x1: PAD, y1: HEIGHT - PAD, x2: WIDTH - PAD, y2: HEIGHT - PAD, class: 'axis' }));
  const label = (text: string, lx: number, ly: number) => {
    const t = svg('text', { x: lx, y: ly, class: 'label' });
    t.textContent = text;
    return t;
  };
  chart.appendChild(label(String(v1), 2, PAD));
  chart.appendChild(label(String(v0), 2, HEIGHT - PAD));
  metrics.forEach((metric, i) => {
    const mine = points.filter((p) => p.metric === metric).sort((a, b) => a.at - b.at);
    const colour = COLOURS[i % COLOURS.length];
    chart.appendChild(svg('polyline', { points: mine.map((p) => `${x(p.at)},${y(p.value)}`).join(' '), stroke: colour, fill: 'none', 'stroke-width': 2 }));
    for (const p of mine) {
      const dot = svg('circle', { cx: x(p.at), cy: y(p.value), r: 3, fill: p.status === 'Successful' ? colour : '#c23030' });
      const title = svg('title');
      title.textContent = `${metric}: ${p.value} (${p.status}) at ${new Date(p.at).toLocaleTimeString()}`;
      dot.appendChild(title);
      chart.appendChild(dot);
    }
  });
  return h('figure', { class: 'chart', 'data-testid': 'measurement-chart' }, chart as unknown as Node, h('figcaption', {}, metrics.join(', ')));
}

function m(value: number): boolean {
  return Number.isFinite(value);
}
