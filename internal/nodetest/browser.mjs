// Opens the live WAL view in headless Chromium (Playwright drives the
// browser given as CHROMIUM), reads what the page shows twice, WAIT_MS
// apart, in the same page, then saves a screenshot. Prints
// {"first": …, "second": …} on stdout. Used by nodetest.go.
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
  await page.waitForTimeout(wait);
  const second = await read();
  await page.screenshot({ path: shot, fullPage: true });
  process.stdout.write(JSON.stringify({ first, second, outside }));
} finally {
  await browser.close();
}
