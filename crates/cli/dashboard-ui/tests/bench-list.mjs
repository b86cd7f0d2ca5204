// Measures the list page of a namespace with many Rollouts in headless Chromium: the time
// from navigation to every row on the page, the bytes the page received by then (by
// request, decoded and on the wire), and the time a filter keystroke takes to redraw. Run by hand against a running
// dashboard (see docs/dashboard.md):
//   DASHBOARD_URL=http://127.0.0.1:3100 NAMESPACE=bench EXPECT=1000 node tests/bench-list.mjs
import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const url = process.env.DASHBOARD_URL.replace(/\/$/, '');
const namespace = process.env.NAMESPACE;
const expect = Number(process.env.EXPECT);
const profile = mkdtempSync(join(tmpdir(), 'sluice-chromium-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send('Network.enable');
  const urls = new Map();
  const bytes = new Map();
  const wire = new Map();
  cdp.on('Network.requestWillBeSent', (e) => urls.set(e.requestId, new URL(e.request.url).pathname));
  cdp.on('Network.dataReceived', (e) => {
    const path = urls.get(e.requestId) ?? '?';
    bytes.set(path, (bytes.get(path) ?? 0) + e.dataLength);
    wire.set(path, (wire.get(path) ?? 0) + e.encodedDataLength);
  });
  await page.goto(`${url}/rollouts/${namespace}`);
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid=rollout-row]').length === n, expect, { timeout: 120_000 });
  const rendered = await page.evaluate(() => performance.now());
  const received = new Map(bytes);
  const transferred = new Map(wire);
  const before = Date.now();
  await page.getByTestId('filter').fill('-7');
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid=rollout-row]').length < n, expect);
  const filtered = Date.now() - before;
  console.log(`rows: ${expect}`);
  console.log(`first render of every row: ${Math.round(rendered)} ms after navigation`);
  const sum = (m) => [...m.values()].reduce((a, b) => a + b, 0);
  for (const [path, n] of received) console.log(`received ${path}: ${n} bytes (${transferred.get(path)} on the wire)`);
  console.log(`received in all: ${sum(received)} bytes (${sum(transferred)} on the wire)`);
  console.log(`filter keystroke to redraw: ${filtered} ms`);
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
