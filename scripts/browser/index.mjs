// Shared harness for tests that run in real headless Chromium.
//
//   import { findChromium, launchBrowser, openPage, serve } from "<repo>/scripts/browser/index.mjs";
//
//   findChromium()            -> path | undefined   $CHROMIUM_PATH, or /usr/bin/chromium (apt-installed
//                                                   when missing and running as root); undefined: skip
//   launchBrowser({ args, protocolTimeout })        headless, no sandbox; close it when done; throws
//                             -> puppeteer Browser  when there is no Chromium (tests fail, not skip);
//                                                   protocolTimeout (ms) bounds one page.evaluate
//   serve({ root, mounts, isolated = true })        static 127.0.0.1 server with COOP/COEP (isolated),
//                             -> { origin, requests, close() }   HTTP Range, `?cut=N` (see server.mjs)
//   openPage(browser, url)    -> { page, logs }     a new page at url; logs collects console messages
//                                                   and page errors as "type: text" lines
//   REPO_ROOT, SHARED_MODELS  absolute folder paths (the repository, and ../shared/models beside it)
//   hasSharedModels()         -> boolean            whether ../shared/models exists (skip when not)
//
// Share one launchBrowser() across a test file's cases (a launch costs about a second); open a page
// per case. Types: index.d.mts beside this file.
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { findChromium } from "./chromium.mjs";

export { findChromium } from "./chromium.mjs";
export { serve } from "./server.mjs";

export const REPO_ROOT = fileURLToPath(new URL("../../", import.meta.url));
export const SHARED_MODELS = fileURLToPath(new URL("../../../shared/models/", import.meta.url));

/** Headless Chromium through puppeteer-core; throws, saying how to get one, when no Chromium can be found. */
export async function launchBrowser({ args = [], protocolTimeout } = {}) {
  const executablePath = findChromium();
  if (executablePath === undefined) throw new Error("no Chromium: set CHROMIUM_PATH or install Debian's chromium package");
  const { default: puppeteer } = await import("puppeteer-core");
  return puppeteer.launch({
    executablePath,
    headless: true,
    ...(protocolTimeout === undefined ? {} : { protocolTimeout }),
    args: [
      // Root (CI containers) cannot use Chromium's sandbox, nor can containers without user
      // namespaces; tests load only our own pages.
      "--no-sandbox",
      "--disable-dev-shm-usage",
      "--no-first-run",
      ...args,
    ],
  });
}

/** Opens url in a new page, collecting its console output and uncaught errors into `logs`. */
export async function openPage(browser, url) {
  const page = await browser.newPage();
  const logs = [];
  page.on("console", (message) => logs.push(`${message.type()}: ${message.text()}`));
  page.on("pageerror", (error) => logs.push(`pageerror: ${error.message}`));
  await page.goto(url, { waitUntil: "load" });
  return { page, logs };
}

/** True when ../shared/models exists (a fresh clone has none; tests skip then). */
export const hasSharedModels = () => existsSync(SHARED_MODELS);
