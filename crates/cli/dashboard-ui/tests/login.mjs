// Logging in to a shared dashboard, in Debian's Chromium, headless. Started by
// crates/cli/tests/cli/dashboard_logins_in_a_browser.rs, which starts the OpenID Connect
// provider, the dashboards (each acting with the least-privileged identity of the install
// manifests) and the RBAC of the users, and passes them in:
//   DASHBOARD_URL  a dashboard with --login token,oidc     SHORT_URL  one with --session-ttl 4s
//   NAMESPACE      the Rollouts' namespace                 ROLLOUT    a canary paused at a step
//   READER         an OIDC account whose groups may read the namespace's Rollouts
//   DEPLOYER       one whose groups may also change them
//   VIEWER_TOKEN   a service account token that may read   SCREENSHOTS  a directory
// Each check prints `ok - ...`; the first failure ends the run with a non-zero code.
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const url = env('DASHBOARD_URL').replace(/\/$/, '');
const shortUrl = env('SHORT_URL').replace(/\/$/, '');
const namespace = env('NAMESPACE');
const rollout = env('ROLLOUT');
const reader = env('READER');
const deployer = env('DEPLOYER');
const viewerToken = env('VIEWER_TOKEN');
const screenshots = env('SCREENSHOTS');
mkdirSync(screenshots, { recursive: true });

const TIMEOUT = 60_000;
const ok = (what) => console.log(`ok - ${what}`);
const check = (condition, what) => {
  if (!condition) throw new Error(`not ok - ${what}`);
  ok(what);
};
const atLogin = (u) => u.pathname === '/login';
const shot = (page, name) => page.screenshot({ path: join(screenshots, `${name}.png`), fullPage: true });

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update'],
});

/// A fresh browser profile (its own cookies) on a page.
async function fresh() {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  context.setDefaultTimeout(TIMEOUT);
  return { context, page: await context.newPage() };
}

/// The page's own request, with its cookies: status and JSON body.
const call = (page, path, method = 'GET') =>
  page.evaluate(
    async ([path, method]) => {
      const r = await fetch(path, { method, headers: { 'content-type': 'application/json' }, body: method === 'PUT' ? '{}' : undefined });
      return { status: r.status, body: await r.json().catch(() => ({})) };
    },
    [path, method],
  );

/// Through the provider's own login and consent pages, back to the dashboard.
async function oidcLogin(page, account) {
  await page.goto(`${url}/rollouts/${namespace}`);
  await page.waitForURL(atLogin);
  await page.getByTestId('login-oidc').click();
  await page.locator('input[name=login]').fill(account);
  await page.locator('input[name=password]').fill('any password');
  await page.getByRole('button', { name: 'Sign-in' }).click();
  // The consent page, the first time an account meets this client.
  await page.getByRole('button', { name: 'Continue' }).click();
  await page.waitForURL(`${url}/rollouts/${namespace}`);
  await page.getByTestId('user').filter({ hasText: account }).waitFor();
}

try {
  // Nothing without a login: the page sends the browser to the login page, the API says 401.
  const anonymous = await fresh();
  await anonymous.page.goto(`${url}/rollout/${namespace}/${rollout}`);
  await anonymous.page.waitForURL(atLogin);
  check(new URL(anonymous.page.url()).searchParams.get('next') === `/rollout/${namespace}/${rollout}`, 'without a session the page goes to the login page, keeping where it was going');
  check((await anonymous.page.getByTestId('login-oidc').count()) === 1 && (await anonymous.page.getByTestId('login-token').count()) === 1, 'the login page offers OpenID Connect and a token');
  const unauthorized = await call(anonymous.page, `/api/v1/rollouts/${namespace}/info`);
  check(unauthorized.status === 401, 'the API answers 401 without a session');
  await shot(anonymous.page, 'login-page');

  // A reader through the provider: sees the Rollouts; the API server refuses their promote.
  const alice = await fresh();
  await oidcLogin(alice.page, reader);
  await alice.page.getByTestId('rollout-row').first().waitFor();
  check((await alice.page.getByTestId('rollout-row').getAttribute('data-name')) === rollout, `${reader} logged in through the provider and sees the Rollout`);
  await alice.page.goto(`${url}/rollout/${namespace}/${rollout}`);
  await alice.page.getByTestId('phase').filter({ hasText: 'Paused' }).waitFor();
  await alice.page.getByTestId('action-promote').click();
  await alice.page.getByTestId('confirm').click();
  const toast = alice.page.locator('#toast');
  await toast.filter({ hasText: 'forbidden' }).waitFor();
  const refusal = await toast.textContent();
  check(refusal.includes(reader) && /cannot patch resource "rollouts(\/status)?"/.test(refusal), `the reader's promote is refused by the API server, as the reader: ${refusal}`);
  await shot(alice.page, 'login-reader-refused');
  const elsewhere = await call(alice.page, '/api/v1/rollouts/kube-system/info');
  check(elsewhere.status === 403 && elsewhere.body.message.includes(reader), `a namespace the reader may not read is refused, 403: ${elsewhere.body.message}`);
  const namespaces = await call(alice.page, '/api/v1/namespace');
  check(JSON.stringify(namespaces.body.availableNamespaces) === JSON.stringify([namespace]), `the namespaces offered are those the reader may read: ${namespaces.body.availableNamespaces}`);
  await alice.page.getByTestId('logout').click();
  await alice.page.waitForURL(atLogin);
  check((await call(alice.page, '/api/v1/settings')).status === 401, 'logged out: the session is gone');

  // A deployer through the provider: the promote goes through.
  const bob = await fresh();
  await oidcLogin(bob.page, deployer);
  await bob.page.goto(`${url}/rollout/${namespace}/${rollout}`);
  await bob.page.getByTestId('phase').filter({ hasText: 'Paused' }).waitFor();
  await bob.page.getByTestId('action-promote').click();
  await bob.page.getByTestId('confirm').click();
  await bob.page.locator('#toast').filter({ hasText: 'done' }).waitFor();
  await bob.page.getByTestId('phase').filter({ hasText: 'Healthy' }).waitFor();
  ok(`${deployer} promoted the Rollout, which went on to Healthy`);
  await shot(bob.page, 'login-deployer-promoted');

  // A session cookie not issued by the dashboard: a genuine one with its user changed.
  const cookies = await bob.context.cookies(url);
  const genuine = cookies.find((c) => c.name === 'sluice_session');
  check(Boolean(genuine) && genuine.httpOnly && genuine.sameSite === 'Lax', 'the session cookie is HTTP-only and same-site');
  const [, body, tag] = genuine.value.split('.');
  const claims = JSON.parse(Buffer.from(body, 'base64url').toString());
  claims.u = 'admin';
  claims.g = ['system:masters'];
  const forgedValue = `v1.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${tag}`;
  const mallory = await fresh();
  await mallory.context.addCookies([{ ...genuine, value: forgedValue }]);
  await mallory.page.goto(`${url}/rollouts/${namespace}`);
  await mallory.page.waitForURL(atLogin);
  await mallory.page.getByTestId('login-error').filter({ hasText: 'not issued by this dashboard' }).waitFor();
  const forged = await fetch(`${url}/api/v1/rollouts/${namespace}/info`, { headers: { cookie: `sluice_session=${forgedValue}` } });
  const forgedBody = await forged.json();
  check(forged.status === 401 && /not issued by this dashboard/.test(forgedBody.message), `a forged session cookie is refused: the login page says so, the API answers 401: ${forgedBody.message}`);
  const still = await fetch(`${url}/api/v1/rollouts/${namespace}/info`, { headers: { cookie: `sluice_session=${genuine.value}` } });
  check(still.status === 200, 'the genuine cookie it was made from still opens the API');

  // A token pasted on the login page: a bad one is refused, a reader's lets in.
  const carol = await fresh();
  await carol.page.goto(`${url}/rollouts/${namespace}`);
  await carol.page.getByTestId('login-token').fill('not-a-token');
  await carol.page.getByTestId('login-token-submit').click();
  await carol.page.getByTestId('login-error').filter({ hasText: 'does not accept this token' }).waitFor();
  ok('a token the API server does not accept is refused on the login page');
  await carol.page.getByTestId('login-token').fill(viewerToken);
  await carol.page.getByTestId('login-token-submit').click();
  await carol.page.waitForURL(`${url}/rollouts/${namespace}`);
  const viewer = await carol.page.getByTestId('user').textContent();
  check(viewer === `system:serviceaccount:${namespace}:viewer`, `a service account's token logs in as it: ${viewer}`);
  await carol.page.getByTestId('rollout-row').first().waitFor();

  // A session that expires: the open page is sent to the login page by itself, and the
  // cookie no longer opens anything.
  const dave = await fresh();
  await dave.page.goto(`${shortUrl}/rollouts/${namespace}`);
  await dave.page.getByTestId('login-token').fill(viewerToken);
  await dave.page.getByTestId('login-token-submit').click();
  await dave.page.waitForURL(`${shortUrl}/rollouts/${namespace}`);
  await dave.page.getByTestId('rollout-row').first().waitFor();
  const [short] = (await dave.context.cookies(shortUrl)).filter((c) => c.name === 'sluice_session');
  await dave.page.waitForURL(atLogin, { timeout: 20_000 });
  ok('when the session expires, the open page goes to the login page by itself');
  const stale = await fetch(`${shortUrl}/api/v1/settings`, { headers: { cookie: `sluice_session=${short.value}` } });
  const staleBody = await stale.json();
  check(stale.status === 401 && /expired/.test(staleBody.message), `the expired session's cookie is refused by the server: ${staleBody.message}`);
  await shot(dave.page, 'login-expired');
} catch (e) {
  console.error(e.message);
  process.exitCode = 1;
} finally {
  await browser.close();
}
