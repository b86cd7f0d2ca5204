// Builds the dashboard page into dist/ (committed, since the Rust binary compiles it in):
// the TypeScript bundled and minified by esbuild, the HTML and CSS copied. Fails when the
// page grows past its size budget. `--check` builds in memory and fails when dist/ differs,
// i.e. when someone changed src/ and forgot `make dashboard-ui`.
import { build } from 'esbuild';
import { readFileSync, writeFileSync, mkdirSync, readdirSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = dirname(fileURLToPath(import.meta.url));
const dist = join(root, 'dist');
// Gzipped bytes of all three files together; the page is sent to every browser tab.
const BUDGET = 200 * 1024;

const bundle = await build({
  entryPoints: [join(root, 'src/main.ts')],
  bundle: true,
  minify: true,
  format: 'esm',
  target: 'es2020',
  write: false,
  legalComments: 'none',
  logLevel: 'warning',
});
const files = {
  'app.js': bundle.outputFiles[0].text,
  'app.css': readFileSync(join(root, 'src/app.css'), 'utf8'),
  'index.html': readFileSync(join(root, 'src/index.html'), 'utf8'),
};

const gzipped = Object.values(files).reduce((sum, text) => sum + gzipSync(text).length, 0);
const raw = Object.values(files).reduce((sum, text) => sum + Buffer.byteLength(text), 0);
console.log(`dashboard page: ${raw} bytes, ${gzipped} bytes gzipped (budget ${BUDGET})`);
if (gzipped > BUDGET) {
  console.error('the dashboard page is over its size budget');
  process.exit(1);
}

if (process.argv.includes('--check')) {
  const stale = Object.entries(files).filter(([name, text]) => {
    try {
      return readFileSync(join(dist, name), 'utf8') !== text;
    } catch {
      return true;
    }
  });
  if (stale.length > 0) {
    console.error(`dist/ is stale (${stale.map(([n]) => n).join(', ')}): run \`make dashboard-ui\``);
    process.exit(1);
  }
  console.log('dist/ matches the sources');
} else {
  mkdirSync(dist, { recursive: true });
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dist, name), text);
  writeFileSync(join(dist, 'SOURCES'), sourcesHash() + '\n');
}

// FNV-1a (64 bit) over the sources' paths and contents, sorted by path; the Rust test
// `dist_is_built_from_the_sources` computes the same to find a dist/ older than src/.
function sourcesHash() {
  const paths = ['build.mjs', 'package-lock.json', ...readdirSync(join(root, 'src')).map((f) => `src/${f}`)].sort();
  let hash = 0xcbf29ce484222325n;
  const mask = (1n << 64n) - 1n;
  const feed = (bytes) => {
    for (const byte of bytes) {
      hash ^= BigInt(byte);
      hash = (hash * 0x100000001b3n) & mask;
    }
  };
  for (const path of paths) {
    feed(Buffer.from(path));
    feed([0]);
    feed(readFileSync(join(root, path)));
    feed([0]);
  }
  return hash.toString(16).padStart(16, '0');
}
