// Drives the page in a headless Chromium (playwright-core, the system's
// browser: no download) for tests/browser/test_browser_client.py:
//
//   node drive.mjs [/usr/bin/chromium [CHROMIUM-FLAG ...]]
//
// extra flags go to Chromium as given (the wss:// test passes
// --ignore-certificate-errors-spki-list=<its test key's hash>).
//
// reads one JSON command a line on stdin and answers one JSON line each:
//   {"goto": "<page url>"}          opens the page (a fresh one each time)
//   {"eval": "<JS expression>"}     its value in the page (a promise is awaited)
// answer: {"ok": true, "value": ...} or {"ok": false, "error": "..."}.
// Uncaught page errors and console errors go to stderr.
import { chromium } from "playwright-core";
import { createInterface } from "node:readline";

const executablePath = process.argv[2] || "/usr/bin/chromium";
const extraArgs = process.argv.slice(3);
// Without the background-networking flags Chromium phones home at start, and
// on a closed network those connections are refused (and slow the start).
const browser = await chromium.launch({
  executablePath,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         ...extraArgs],
});
let page = null;

async function run(command) {
  if ("goto" in command) {
    if (page) await page.close();
    page = await browser.newPage();
    page.on("pageerror", (error) => process.stderr.write(`pageerror: ${error.message}\n`));
    page.on("console", (message) => {
      if (message.type() === "error") process.stderr.write(`console: ${message.text()}\n`);
    });
    await page.goto(command.goto);
    await page.waitForFunction(() => window.sansrsDemo !== undefined);
    return null;
  }
  if ("eval" in command) {
    if (!page) throw new Error("no page: goto first");
    return await page.evaluate(command.eval);
  }
  throw new Error(`unknown command ${JSON.stringify(command)}`);
}

const write = (answer) => process.stdout.write(JSON.stringify(answer) + "\n");
write({ ok: true, value: browser.version() });
for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  try {
    write({ ok: true, value: (await run(JSON.parse(line))) ?? null });
  } catch (error) {
    write({ ok: false, error: String(error && error.message) });
  }
}
await browser.close();
