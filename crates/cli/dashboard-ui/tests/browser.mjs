// Drives the dashboard in Debian's Chromium, headless, against a live control plane and a
// running controller. Started by crates/cli/tests/dashboard_in_a_browser.rs, which creates
// the namespace's Rollouts and the two dashboard servers and passes them in:
//   DASHBOARD_URL   a dashboard that may write        READONLY_URL   one started --read-only
//   NAMESPACE       the namespace of the Rollouts     ROLLOUTS       their names, comma-separated
//   CANARY          a Healthy canary with steps [setWeight 25, pause, setWeight 50, pause]
//   CANARY_IMAGE    CONTAINER=IMAGE:TAG to update it to     SCREENSHOTS   a directory
//   CHROMIUM        the browser [default /usr/bin/chromium]
// Each check prints `ok - ...`; the first failure ends the run with a non-zero code.
import { chromium } from 'playwright-core';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const url = env('DASHBOARD_URL').replace(/\/$/, '');
const readOnlyUrl = env('READONLY_URL').replace(/\/$/, '');
const namespace = env('NAMESPACE');
const names = env('ROLLOUTS').split(',');
const canary = env('CANARY');
const [container, newImage] = env('CANARY_IMAGE').split('=');
const screenshots = env('SCREENSHOTS');
mkdirSync(screenshots, { recursive: true });

// Long enough for a controller to take a step on a loaded 2-core machine.
const TIMEOUT = 60_000;
let passed = 0;
const ok = (what) => {
  passed += 1;
  console.log(`ok - ${what}`);
};
const check = (condition, what) => {
  if (!condition) throw new Error(`not ok - ${what}`);
  ok(what);
};

const profile = mkdtempSync(join(tmpdir(), 'sluice-chromium-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  viewport: { width: 1280, height: 900 },
  args: [
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ],
});
context.setDefaultTimeout(TIMEOUT);

try {
  const page = await context.newPage();
  const failedRequests = [];
  page.on('requestfailed', (r) => {
    if (!r.url().includes('/watch')) failedRequests.push(r.url());
  });
  page.on('pageerror', (e) => failedRequests.push(`page error: ${e.message}`));

  // The list: every Rollout of the namespace, then the filter.
  await page.goto(`${url}/rollouts/${namespace}`);
  const rows = page.getByTestId('rollout-row');
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid=rollout-row]').length === n, names.length);
  const shown = await rows.evaluateAll((els) => els.map((e) => e.getAttribute('data-name')));
  check(JSON.stringify(shown) === JSON.stringify([...names].sort()), `the list shows the ${names.length} Rollouts: ${shown.join(', ')}`);
  await page.getByTestId('live').filter({ hasText: 'live' }).waitFor();
  await page.screenshot({ path: join(screenshots, 'dashboard-list.png'), fullPage: true });
  await page.getByTestId('filter').fill(canary);
  await page.waitForFunction(() => document.querySelectorAll('[data-testid=rollout-row]').length === 1);
  check((await rows.first().getAttribute('data-name')) === canary, 'the filter leaves the matching Rollout');
  await page.getByTestId('filter').fill('');

  // One Rollout, opened from the list; a marker on the window tells a reload apart.
  await page.getByRole('link', { name: canary, exact: true }).click();
  await page.waitForURL(`**/rollout/${namespace}/${canary}`);
  await page.evaluate(() => {
    window.sluiceNoReload = true;
  });
  const phase = page.getByTestId('phase');
  const step = page.getByTestId('step');
  await phase.filter({ hasText: 'Healthy' }).waitFor();
  check((await page.getByTestId('steps').locator('li').count()) === 4, 'the Rollout page lists the 4 steps');
  check((await page.getByTestId('action-promote').count()) === 1, 'the writable dashboard shows the action buttons');

  // A new image through the API: the page follows the canary to its first pause.
  const [image, tag] = [newImage.slice(0, newImage.lastIndexOf(':')), newImage.slice(newImage.lastIndexOf(':') + 1)];
  const set = await fetch(`${url}/api/v1/rollouts/${namespace}/${canary}/set/${container}/${image}/${tag}`, { method: 'PUT' });
  check(set.status === 200, `PUT .../set/${container}/${image}/${tag} answers 200`);
  await step.filter({ hasText: /^1\/4$/ }).waitFor();
  await phase.filter({ hasText: 'Paused' }).waitFor();
  check((await page.getByTestId('current-step').textContent()) === 'Pause until promoted', 'the page shows step 1/4, Paused, the pause marked current');
  await page.screenshot({ path: join(screenshots, 'dashboard-rollout-paused.png'), fullPage: true });

  // Promote, confirmed in the dialog: the canary moves on to the second pause.
  await page.getByTestId('action-promote').click();
  await page.getByTestId('confirm-dialog').waitFor();
  await page.getByTestId('confirm').click();
  await step.filter({ hasText: /^3\/4$/ }).waitFor();
  await phase.filter({ hasText: 'Paused' }).waitFor();
  check(true, 'a promote click advances the canary to step 3/4');
  await page.screenshot({ path: join(screenshots, 'dashboard-rollout-promoted.png'), fullPage: true });

  // Cancel leaves it alone; abort, confirmed, shows Degraded.
  await page.getByTestId('action-abort').click();
  await page.getByTestId('cancel').click();
  check((await page.getByTestId('confirm-dialog').count()) === 0, 'Cancel closes the dialog');
  await page.getByTestId('action-abort').click();
  await page.getByTestId('confirm').click();
  await phase.filter({ hasText: 'Degraded' }).waitFor();
  check(true, 'abort shows Degraded');
  await page.screenshot({ path: join(screenshots, 'dashboard-rollout-aborted.png'), fullPage: true });
  check(await page.evaluate(() => window.sluiceNoReload === true), 'all of it without a reload of the page');
  check(failedRequests.length === 0, `no request failed (${failedRequests.join(', ')})`);

  // Read-only: the same Rollout, no buttons; the API refuses every change.
  const readOnly = await context.newPage();
  await readOnly.goto(`${readOnlyUrl}/rollout/${namespace}/${canary}`);
  await readOnly.getByTestId('phase').filter({ hasText: 'Degraded' }).waitFor();
  await readOnly.getByTestId('read-only').waitFor();
  const buttons = await readOnly.locator('[data-testid^=action-]').count();
  check(buttons === 0, `read-only mode shows no action buttons (${buttons})`);
  await readOnly.screenshot({ path: join(screenshots, 'dashboard-read-only.png'), fullPage: true });
  for (const path of ['promote', 'abort', 'retry', 'restart', 'undo/1', `set/${container}/${image}/${tag}`]) {
    const answer = await fetch(`${readOnlyUrl}/api/v1/rollouts/${namespace}/${canary}/${path}`, { method: 'PUT' });
    const body = await answer.json();
    check(answer.status === 403 && /read-only/.test(body.message), `read-only PUT .../${path} answers 403: ${body.message}`);
  }
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
console.log(`${passed} passed, 0 failed`);
