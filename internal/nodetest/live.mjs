// Drives the live WAL view in headless Chromium (Playwright drives the
// browser given as CHROMIUM) for a Go test, one command a line: it opens
// the page at argv[2], then reads JSON commands on stdin and answers
// each with one JSON line on stdout (used by live.go):
//
//   {"op":"until","status":"live","ms":N}    reads until the status starts so
//   {"op":"watch","ms":N,"max":M,"until":K}  reads every 200 ms for N ms, on
//                                            up to M ms until count K was > 0;
//                                            the first read, the last, the most
//   {"op":"shot","path":P}                   a full-page screenshot
//   {"op":"close"}
//
// Every answer carries "outside": the requests the page made to any
// other origin so far.
import { chromium } from 'playwright-core';
import { createInterface } from 'node:readline';

const [url] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--no-first-run'],
});
const outside = [];
const say = o => process.stdout.write(JSON.stringify({ ...o, outside }) + '\n');
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 1200 } });
  page.on('request', r => { if (!r.url().startsWith(new URL(url).origin)) outside.push(r.url()); });
  await page.goto(url);
  const read = () => page.evaluate(() => {
    const text = id => document.getElementById(id).textContent;
    const q = sel => document.querySelectorAll(sel).length;
    const errors = {};
    for (const e of document.querySelectorAll('.perr')) errors[e.id.replace('err-', '')] = e.textContent;
    return {
      status: text('status'), stale: document.body.classList.contains('stale'),
      acked: Number(text('acked')), sinceOpen: Number(text('sinceopen')), polls: Number(text('polls')),
      tapeSegments: Number(document.getElementById('tape').dataset.segments),
      segDivs: q('#tape .seg'), parts: q('#tape .part'), kept: q('#tape .seg.kept'),
      tapeEmpty: document.querySelector('#tape .empty')?.textContent ?? '',
      bits: q('#bitmaps .bit'), bitRows: q('#bitmaps .bmrow'),
      bitmapsEmpty: document.querySelector('#bitmaps .empty')?.textContent ?? '',
      chartLines: q('#chart polyline'), chart: text('chart'), memoryBars: q('#memory .bar'), memory: text('memory'),
      namespaces: text('nstable'), waiting: text('waiting'), alerts: text('alerts'), errors,
    };
  });
  say({ ready: true });
  for await (const raw of createInterface({ input: process.stdin })) {
    const cmd = JSON.parse(raw);
    try {
      if (cmd.op === 'close') break;
      if (cmd.op === 'shot') { await page.screenshot({ path: cmd.path, fullPage: true }); say({}); continue; }
      if (cmd.op === 'until') {
        const start = Date.now(); let r = await read();
        while (!r.status.startsWith(cmd.status) && Date.now() - start < cmd.ms) { await page.waitForTimeout(100); r = await read(); }
        say({ read: r }); continue;
      }
      if (cmd.op === 'watch') {
        const first = await read(), most = { ...first }, start = Date.now();
        let last = first;
        while (Date.now() - start < cmd.ms || (cmd.until && most[cmd.until] === 0 && Date.now() - start < cmd.max)) {
          await page.waitForTimeout(200);
          last = await read();
          for (const k of Object.keys(most)) if (typeof most[k] === 'number') most[k] = Math.max(most[k], last[k]);
        }
        say({ first, last, most }); continue;
      }
      say({ error: 'unknown op ' + cmd.op });
    } catch (e) {
      say({ error: String(e) });
    }
  }
} finally {
  await browser.close();
}
