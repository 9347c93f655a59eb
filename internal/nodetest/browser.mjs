// Opens the live WAL view in headless Chromium (Playwright drives the
// browser given as CHROMIUM), reads what the page shows, then again every
// 200 ms for WAIT_MS — and on, up to 15 s, until some read showed a live
// segment's bitmap (segments come and go in milliseconds) — in the same
// page, then saves a screenshot. Prints {"first": …, "second": …,
// "most": …} on stdout: the first read, the last, and the most of each
// count any read saw. Used by nodetest.go.
import { chromium } from 'playwright-core';

const [url, shot] = process.argv.slice(2);
const wait = Number(process.env.WAIT_MS || 2500);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--no-first-run'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 1100 } });
  const outside = [];
  page.on('request', r => { if (!r.url().startsWith(new URL(url).origin)) outside.push(r.url()); });
  await page.goto(url);
  await page.waitForFunction(() => document.getElementById('status').textContent === 'live', null, { timeout: 30000 });
  const read = () => page.evaluate(() => {
    const num = id => Number(document.getElementById(id).textContent);
    const q = sel => document.querySelectorAll(sel).length;
    return {
      status: document.getElementById('status').textContent,
      acked: num('acked'), sinceOpen: num('sinceopen'), polls: num('polls'),
      tapeSegments: Number(document.getElementById('tape').dataset.segments),
      segDivs: q('#tape .seg'), parts: q('#tape .part'),
      bits: q('#bitmaps .bit'), bitRows: q('#bitmaps .bmrow'),
      chartLines: q('#chart polyline'), memoryBars: q('#memory .bar'),
      memory: document.getElementById('memory').textContent,
      alerts: document.getElementById('alerts').textContent,
    };
  });
  const first = await read();
  const most = { ...first };
  const start = Date.now();
  let second = first;
  while (Date.now() - start < wait || (most.bits === 0 && Date.now() - start < 15000)) {
    await page.waitForTimeout(200);
    second = await read();
    for (const k of Object.keys(most)) if (typeof most[k] === 'number') most[k] = Math.max(most[k], second[k]);
  }
  await page.screenshot({ path: shot, fullPage: true });
  process.stdout.write(JSON.stringify({ first, second, most, outside }));
} finally {
  await browser.close();
}
