// Keeps dashboard tabs open in headless Chromium for as long as it runs, so that a soak
// measures the server with live watch streams: two tabs on the namespace's list and one on
// a Rollout. Once every row is drawn it prints `tabs open`; then, every CHECK_SECONDS, one
// line of what the pages show (the rows, the Rollout's ReplicaSets and whether the page is
// live), so the soak's log shows the pages kept up. Stops on SIGTERM or SIGINT.
// Started by `sluice-bench --soak ... --dashboard`:
//   DASHBOARD_URL=http://127.0.0.1:3100 NAMESPACE=ns ROLLOUT=name EXPECT=1000 node tests/hold-tabs.mjs
import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const url = process.env.DASHBOARD_URL.replace(/\/$/, '');
const namespace = process.env.NAMESPACE;
const rollout = process.env.ROLLOUT;
const expect = Number(process.env.EXPECT);
const every = Number(process.env.CHECK_SECONDS || 300) * 1000;
const profile = mkdtempSync(join(tmpdir(), 'sluice-chromium-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync',
    // A hidden tab's timers are throttled; these tabs stand for ones a user watches.
    '--disable-background-timer-throttling', '--disable-renderer-backgrounding', '--disable-backgrounding-occluded-windows'],
});
let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await context.close().catch(() => {});
  rmSync(profile, { recursive: true, force: true });
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);

const rows = (page) => page.evaluate(() => document.querySelectorAll('[data-testid=rollout-row]').length);
const lists = [];
for (let i = 0; i < 2; i++) {
  const page = await context.newPage();
  await page.goto(`${url}/rollouts/${namespace}`);
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid=rollout-row]').length === n, expect, { timeout: 300_000 });
  lists.push(page);
}
const one = await context.newPage();
await one.goto(`${url}/rollout/${namespace}/${rollout}`);
await one.getByTestId('rollout-name').waitFor({ timeout: 120_000 });
console.log('tabs open');

const started = Date.now();
for (;;) {
  await new Promise((resolve) => setTimeout(resolve, every));
  if (stopping) break;
  const counts = await Promise.all(lists.map(rows));
  const replicaSets = await one.evaluate(() => [...document.querySelectorAll('[data-testid=replicaset]')].map((e) => e.dataset.name));
  const live = await one.evaluate(() => !document.querySelector('[data-testid=live]')?.classList.contains('off'));
  const minute = ((Date.now() - started) / 60_000).toFixed(1);
  console.log(`minute ${minute}: list tabs ${counts.join(', ')} rows; ${rollout}: ReplicaSets ${replicaSets.join(' ')}; live ${live}`);
}
