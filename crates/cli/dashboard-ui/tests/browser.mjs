// Drives the dashboard in Debian's Chromium, headless, against a live control plane and a
// running controller. Started by crates/cli/tests/cli/dashboard_in_a_browser.rs, which creates
// the namespace's Rollouts and the two dashboard servers and passes them in:
//   DASHBOARD_URL   a dashboard that may write        READONLY_URL   one started --read-only -A
//   VIEWER_URL      one started with the token of a user who may read but not change
//   NAMESPACE       the namespace of the Rollouts     ROLLOUTS       their names, comma-separated
//   CANARY          a Healthy canary with the steps [setWeight 25, pause, analysis (3
//                   measurements), setWeight 50, pause]
//   CANARY_IMAGES   CONTAINER=IMAGE:TAG,IMAGE:TAG: the two images it is updated to
//   SCREENSHOTS     a directory                       CHROMIUM  the browser [/usr/bin/chromium]
// The browser reaches the writable dashboard through a TCP proxy of this script, which can
// drop every connection and refuse new ones, as a network or a restarted server would.
// Each check prints `ok - ...`; the first failure ends the run with a non-zero code.
import { chromium } from 'playwright-core';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const direct = env('DASHBOARD_URL').replace(/\/$/, '');
const readOnlyUrl = env('READONLY_URL').replace(/\/$/, '');
const viewerUrl = env('VIEWER_URL').replace(/\/$/, '');
const namespace = env('NAMESPACE');
const names = env('ROLLOUTS').split(',');
const canary = env('CANARY');
const [container, images] = env('CANARY_IMAGES').split('=');
const [firstImage, secondImage] = images.split(',');
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

/// A TCP proxy to `url` on a free port: `drop()` closes every connection and refuses new
/// ones until `restore()`.
async function proxy(url) {
  const { hostname, port } = new URL(url);
  const open = new Set();
  let refusing = false;
  const server = net.createServer((client) => {
    if (refusing) {
      client.destroy();
      return;
    }
    const upstream = net.connect(Number(port), hostname);
    const close = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
    };
    open.add(client);
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
    client.pipe(upstream).pipe(client);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    drop() {
      refusing = true;
      for (const socket of open) socket.destroy();
    },
    restore() {
      refusing = false;
    },
    close() {
      server.close();
    },
  };
}

const split = (image) => [image.slice(0, image.lastIndexOf(':')), image.slice(image.lastIndexOf(':') + 1)];
const network = await proxy(direct);
const url = network.url;
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
  // Requests cut by the test's own dropped connection are expected to fail.
  let dropped = false;
  page.on('requestfailed', (r) => {
    if (!r.url().includes('/watch') && !dropped) failedRequests.push(r.url());
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
  check((await page.getByTestId('steps').locator('li').count()) === 5, 'the Rollout page lists the 5 steps');
  check((await page.getByTestId('action-promote').count()) === 1, 'the writable dashboard shows the action buttons');

  // A new image through the API: the page follows the canary to its first pause.
  const [image, tag] = split(firstImage);
  const set = await fetch(`${url}/api/v1/rollouts/${namespace}/${canary}/set/${container}/${image}/${tag}`, { method: 'PUT' });
  check(set.status === 200, `PUT .../set/${container}/${image}/${tag} answers 200`);
  await step.filter({ hasText: /^1\/5$/ }).waitFor();
  await phase.filter({ hasText: 'Paused' }).waitFor();
  check((await page.getByTestId('current-step').textContent()) === 'Pause until promoted', 'the page shows step 1/5, Paused, the pause marked current');
  const explained = page.getByTestId('explain');
  await explained.filter({ hasText: 'step 2/5 is a pause without a duration' }).waitFor();
  check((await explained.textContent()).includes(`kubectl sluice promote ${canary}`), "the page shows explain's answer: a promotion awaited, and the command");
  await page.screenshot({ path: join(screenshots, 'dashboard-rollout-paused.png'), fullPage: true });

  // Promote, confirmed in the dialog: the canary goes through its analysis step (the page
  // shows it running) to the second pause, and the run's three measurements are drawn.
  await page.getByTestId('action-promote').click();
  await page.getByTestId('confirm-dialog').waitFor();
  await page.getByTestId('confirm').click();
  await step.filter({ hasText: /^2\/5$/ }).waitFor();
  ok('a promote click advances the canary to its analysis step, 2/5');
  await step.filter({ hasText: /^4\/5$/ }).waitFor();
  await phase.filter({ hasText: 'Paused' }).waitFor();
  ok('the page follows it to the second pause, 4/5');
  const run = page.getByTestId('analysisrun');
  await run.filter({ hasText: 'Successful' }).waitFor();
  const dots = await page.getByTestId('measurement-chart').locator('circle').count();
  check(dots === 3, `the AnalysisRun's 3 measurements are drawn (${dots})`);
  await page.screenshot({ path: join(screenshots, 'dashboard-rollout-analysis.png'), fullPage: true });

  // The connection drops and stays down while the Rollout is promoted to the end: the page
  // says so, reconnects by itself and shows the Rollout as it now is.
  dropped = true;
  network.drop();
  await page.getByTestId('live').filter({ hasText: 'reconnecting' }).waitFor();
  ok('a dropped connection shows as reconnecting');
  const promoted = await fetch(`${direct}/api/v1/rollouts/${namespace}/${canary}/promote`, { method: 'PUT' });
  check(promoted.status === 200, 'PUT .../promote answers 200');
  await new Promise((resolve) => setTimeout(resolve, 2000));
  network.restore();
  await page.getByTestId('live').filter({ hasText: 'live' }).waitFor();
  dropped = false;
  await phase.filter({ hasText: 'Healthy' }).waitFor();
  await step.filter({ hasText: /^5\/5$/ }).waitFor();
  ok('the page reconnects and shows the finished update, Healthy at 5/5');

  // The user's own pause from the page, then lifted: Paused, then Healthy again.
  await page.getByTestId('action-pause').click();
  await page.getByTestId('confirm').click();
  await phase.filter({ hasText: 'Paused' }).waitFor();
  ok('a pause click pauses the Rollout');
  await page.getByTestId('action-resume').click();
  await page.getByTestId('confirm').click();
  await phase.filter({ hasText: 'Healthy' }).waitFor();
  ok('a resume click lifts the pause, Healthy again');

  // A new image set from the page, confirmed: a new update, at its first pause.
  const [secondRepo] = split(secondImage);
  await page.getByTestId('set-image-container').selectOption(container);
  await page.getByTestId('set-image-value').fill(secondImage);
  await page.getByTestId('action-set-image').click();
  await page.getByTestId('confirm').click();
  await step.filter({ hasText: /^1\/5$/ }).waitFor();
  await phase.filter({ hasText: 'Paused' }).waitFor();
  check((await page.getByTestId('revision').count()) === 3, `setting ${secondRepo}'s new tag from the page starts revision 3, paused at 1/5`);

  // Cancel leaves it alone; abort, confirmed, shows Degraded.
  await page.getByTestId('action-abort').click();
  await page.getByTestId('cancel').click();
  check((await page.getByTestId('confirm-dialog').count()) === 0, 'Cancel closes the dialog');
  await page.getByTestId('action-abort').click();
  await page.getByTestId('confirm').click();
  await phase.filter({ hasText: 'Degraded' }).waitFor();
  ok('abort shows Degraded');
  await page.screenshot({ path: join(screenshots, 'dashboard-rollout-aborted.png'), fullPage: true });
  check(await page.evaluate(() => window.sluiceNoReload === true), 'all of it without a reload of the page');
  check(failedRequests.length === 0, `no request failed (${failedRequests.join(', ')})`);

  // Read-only: the same Rollout, no buttons; the API refuses every change.
  const readOnly = await context.newPage();
  await readOnly.goto(`${readOnlyUrl}/rollout/${namespace}/${canary}`);
  await readOnly.getByTestId('phase').filter({ hasText: 'Degraded' }).waitFor();
  await readOnly.getByTestId('read-only').waitFor();
  const namespaces = await readOnly.getByTestId('namespace-select').locator('option').allTextContents();
  check(namespaces.includes(namespace), `with -A the bar offers the namespaces with Rollouts, ${namespace} among them`);
  const buttons = await readOnly.locator('[data-testid^=action-]').count();
  check(buttons === 0, `read-only mode shows no action buttons (${buttons})`);
  await readOnly.screenshot({ path: join(screenshots, 'dashboard-read-only.png'), fullPage: true });
  const [repo, newTag] = split(secondImage);
  for (const path of ['promote', 'abort', 'retry', 'restart', 'pause', 'resume', 'undo/1', `set/${container}/${repo}/${newTag}`]) {
    const answer = await fetch(`${readOnlyUrl}/api/v1/rollouts/${namespace}/${canary}/${path}`, { method: 'PUT' });
    const body = await answer.json();
    check(answer.status === 403 && /read-only/.test(body.message), `read-only PUT .../${path} answers 403: ${body.message}`);
  }

  // The user's own identity: a user who may only read sees the Rollout, and the API server
  // refuses its change with a 403 that the dashboard passes on.
  const seen = await fetch(`${viewerUrl}/api/v1/rollouts/${namespace}/${canary}/info`);
  check(seen.status === 200 && (await seen.json()).status === 'Degraded', "a reader's dashboard shows the Rollout");
  const refused = await fetch(`${viewerUrl}/api/v1/rollouts/${namespace}/${canary}/retry`, { method: 'PUT' });
  const refusal = await refused.json();
  check(refused.status === 403 && /forbidden/.test(refusal.message) && /viewer/.test(refusal.message), `its retry is refused by the cluster's RBAC, 403: ${refusal.message}`);

  // An experiment step: a new image starts the step's Experiment, which the Rollout's page
  // shows running with the ReplicaSets of its two templates.
  const withExperiment = env('EXPERIMENT_ROLLOUT');
  const xp = await context.newPage();
  await xp.goto(`${url}/rollout/${namespace}/${withExperiment}`);
  await xp.getByTestId('phase').filter({ hasText: 'Healthy' }).waitFor();
  const started = await fetch(`${url}/api/v1/rollouts/${namespace}/${withExperiment}/set/${container}/${image}/${tag}`, { method: 'PUT' });
  check(started.status === 200, `a new image for ${withExperiment} answers 200`);
  const experiment = xp.getByTestId('experiment');
  await experiment.getByTestId('experiment-phase').filter({ hasText: 'Running' }).waitFor();
  await xp.waitForFunction(() => document.querySelectorAll('[data-testid=experiment] [data-testid=replicaset]').length === 2);
  const templates = await experiment.getByTestId('replicaset').evaluateAll((els) => els.map((e) => e.getAttribute('data-name')));
  check(templates.length === 2, `the page shows the step's Experiment running, with its 2 ReplicaSets: ${templates.join(', ')}`);
  await xp.screenshot({ path: join(screenshots, 'dashboard-rollout-experiment.png'), fullPage: true });

  // Back on the writable page: roll back to revision 2, whose template is the stable one's,
  // so the aborted update is over and the Rollout is Healthy on its first new image again.
  await page.bringToFront();
  await page.getByTestId('action-undo-2').click();
  await page.getByTestId('confirm').click();
  await phase.filter({ hasText: 'Healthy' }).waitFor();
  const shownImages = await page.getByTestId('rollout-images').textContent();
  check(shownImages === firstImage, `rolling back to revision 2 from the page makes it Healthy on ${shownImages}`);
} finally {
  network.close();
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
console.log(`${passed} passed, 0 failed`);
