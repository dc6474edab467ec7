/// <reference lib="dom" />
/**
 * The chat app end to end in headless Chromium, on the real engine and a real model: load
 * stories260K from the list the server gives, send a prompt, watch the answer stream in and
 * equal the engine's greedy continuation in Node, stop an answer, see readable errors for a
 * dropped file that is not a model and a URL that is not there, then load from a local file and
 * answer again.
 */
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { loadModel } from "@infer/core";
import "@infer/core/node";
import "@infer/wasm";
import type { Page } from "puppeteer-core";
import { serveWebApp } from "../src/index.js";
import { harness } from "./harness.js";

const storiesGguf = join(harness.SHARED_MODELS, "stories260K", "stories260K.gguf");
const skip = harness.hasSharedModels() ? undefined : `shared models not found at ${harness.SHARED_MODELS} (a clone outside this workplace has none)`;
/** Not committed: dist/ is ignored. */
const OUTPUT = fileURLToPath(new URL("../test-output/", import.meta.url));
const PROMPT = "Once upon a time, a little dog";
const MAX_TOKENS = 60;

/** Text of the newest answer in the page. */
const lastAnswer = (page: Page) => page.$eval(".message.assistant:last-of-type .text", (e) => e.textContent ?? "");

/** Waits for an answer to end and returns its finish reason ("stop", "length", "abort"), failing with the page's error if one shows. */
async function answerEnd(page: Page): Promise<string> {
  await page.waitForFunction(() => document.querySelector<HTMLElement>("#stats")?.dataset.finish || !document.querySelector("#error")?.hasAttribute("hidden"), { timeout: 60_000 });
  const error = await page.$eval("#error", (e) => (e.hasAttribute("hidden") ? "" : e.textContent));
  assert.equal(error, "", "the page showed an error while answering");
  return page.$eval("#stats", (e) => (e as HTMLElement).dataset.finish ?? "");
}

async function waitLoaded(page: Page): Promise<string> {
  await page.waitForFunction(() => /^Loaded /.test(document.querySelector("#model-status")?.textContent ?? "") || !document.querySelector("#error")?.hasAttribute("hidden"), { timeout: 60_000 });
  const error = await page.$eval("#error", (e) => (e.hasAttribute("hidden") ? "" : e.textContent));
  assert.equal(error, "", "the page showed an error while loading");
  return page.$eval("#model-status", (e) => e.textContent ?? "");
}

async function setSettings(page: Page, settings: Record<string, string>): Promise<void> {
  for (const [id, value] of Object.entries(settings)) {
    await page.$eval(`#${id}`, (e, v) => ((e as HTMLInputElement).value = v), value);
  }
}

async function send(page: Page, text: string): Promise<void> {
  await page.focus("#prompt");
  await page.keyboard.type(text);
  await page.keyboard.press("Enter");
}

test("the chat app in Chromium: load, stream, stop, a broken file, a local file", { skip, timeout: 300_000 }, async (t) => {
  mkdirSync(OUTPUT, { recursive: true });
  const model = await loadModel(storiesGguf, { backend: "wasm" });
  const greedy = (await model.generateText(PROMPT, { temperature: 0, maxTokens: MAX_TOKENS })).text;
  await model.close();
  assert.ok(greedy.length > 0);

  const server = await serveWebApp({ models: [storiesGguf], port: 0 });
  const browser = await harness.launchBrowser();
  try {
    const { page, logs } = await harness.openPage(browser, server.url);
    await page.setViewport({ width: 1100, height: 760 });
    assert.equal(await page.evaluate(() => crossOriginIsolated), true);

    // Load the model infer web serves; it has no chat template, and the page says so.
    await page.waitForSelector("#served-models button");
    await page.evaluate(() => {
      const shown: string[] = [];
      (window as unknown as { progress: string[] }).progress = shown;
      const text = document.querySelector("#progress-text")!;
      new MutationObserver(() => shown.push(text.textContent ?? "")).observe(text, { childList: true, characterData: true, subtree: true });
    });
    await page.click("#served-models button");
    assert.match(await waitLoaded(page), /^Loaded stories260K\.gguf \(llama/);
    const progress = await page.evaluate(() => (window as unknown as { progress: string[] }).progress);
    assert.ok(progress.some((line) => /^Downloading: [\d.]+ (B|KB|MB) of 1\.1 MB/.test(line)), `progress shown: ${JSON.stringify(progress)}`);
    assert.match(await page.$eval("#mode-note", (e) => e.textContent ?? ""), /no chat template/);

    // The answer streams: every change of its text is recorded, and it ends as Node's greedy text.
    await page.evaluate(() => {
      const seen: number[] = [];
      (window as unknown as { seen: number[] }).seen = seen;
      new MutationObserver(() => {
        const answer = document.querySelector(".message.assistant:last-of-type .text");
        if (answer) seen.push(answer.textContent?.length ?? 0);
      }).observe(document.querySelector("#messages")!, { childList: true, subtree: true, characterData: true });
    });
    await setSettings(page, { temperature: "0", "max-tokens": String(MAX_TOKENS) });
    await send(page, PROMPT);
    assert.equal(await answerEnd(page), "length");
    assert.equal(await lastAnswer(page), greedy);
    const seen = await page.evaluate(() => (window as unknown as { seen: number[] }).seen);
    const lengths = [...new Set(seen.filter((n) => n > 0))];
    assert.ok(lengths.length >= 2, `the answer grew in ${lengths.length} step(s): ${lengths.join(", ")}`);
    assert.deepEqual(lengths, [...lengths].sort((a, b) => a - b));
    assert.match(await page.$eval("#stats", (e) => e.textContent ?? ""), new RegExp(`^${MAX_TOKENS} tokens · [\\d.]+ tokens/s · first token after \\d+ ms`));
    await page.screenshot({ path: join(OUTPUT, "chat-app-answer.png") });

    // Stop: clicked as soon as the next answer shows text, it ends well before max tokens.
    await page.click("#reset");
    assert.equal(await page.$$eval(".message", (m) => m.length), 0);
    await setSettings(page, { "max-tokens": "4000" });
    await page.evaluate(() => {
      new MutationObserver((_, observer) => {
        if (document.querySelector(".message.assistant:last-of-type .text")?.textContent) {
          observer.disconnect();
          document.querySelector<HTMLButtonElement>("#stop")!.click();
        }
      }).observe(document.querySelector("#messages")!, { childList: true, subtree: true, characterData: true });
    });
    await send(page, "The cat");
    assert.equal(await answerEnd(page), "abort");
    const stopped = Number(/^(\d+) tokens/.exec(await page.$eval("#stats", (e) => e.textContent ?? ""))?.[1]);
    assert.ok(stopped >= 1 && stopped < 4000, `${stopped} tokens after Stop`);
    t.diagnostic(`Stop, clicked at the first token, ended the answer after ${stopped} tokens`);
    assert.match(await page.$eval("#stats", (e) => e.textContent ?? ""), /stopped$/);

    // A dropped file that is not a GGUF: a readable error, and the page takes the next model.
    await page.evaluate(() => {
      const data = new DataTransfer();
      data.items.add(new File(["this is a text file, not a model"], "notes.gguf"));
      document.dispatchEvent(new DragEvent("drop", { dataTransfer: data, bubbles: true, cancelable: true }));
    });
    await page.waitForSelector("#error:not([hidden])", { timeout: 60_000 });
    assert.match(await page.$eval("#error-headline", (e) => e.textContent ?? ""), /not a model the engine can read/);
    assert.match(await page.$eval("#error-detail", (e) => e.textContent ?? ""), /\(MODEL_FORMAT\)$/);
    assert.equal(await page.$eval("#model-status", (e) => e.textContent), "No model loaded.");
    await page.screenshot({ path: join(OUTPUT, "chat-app-error.png") });

    // A URL that answers 404, typed into the model box: a download error, not a frozen page.
    await page.click("#error-close");
    await page.type("#model-url", "models/9/missing.gguf");
    await page.click("#url-form button[type=submit]");
    await page.waitForSelector("#error:not([hidden])", { timeout: 60_000 });
    assert.match(await page.$eval("#error-headline", (e) => e.textContent ?? ""), /could not be downloaded/);
    assert.match(await page.$eval("#error-detail", (e) => e.textContent ?? ""), /missing\.gguf.*\(MODEL_NOT_FOUND\)$/);

    const input = await page.$("input#model-file");
    await input!.uploadFile(storiesGguf);
    assert.match(await waitLoaded(page), /^Loaded stories260K\.gguf \(1\.1 MB\)/);
    await setSettings(page, { "max-tokens": String(MAX_TOKENS) });
    await send(page, PROMPT);
    assert.equal(await answerEnd(page), "length");
    assert.equal(await lastAnswer(page), greedy);
    // A phone-sized screen in dark mode: the panel stacks above the conversation.
    await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: "dark" }]);
    await page.setViewport({ width: 400, height: 800 });
    const panel = (await (await page.$(".panel"))!.boundingBox())!;
    const chat = (await (await page.$(".chat"))!.boundingBox())!;
    assert.ok(chat.y >= panel.y + panel.height - 1 && chat.width > 350, "the conversation sits below the panel, full width");
    await page.screenshot({ path: join(OUTPUT, "chat-app-narrow-dark.png"), fullPage: true });
    assert.deepEqual(logs.filter((line) => line.startsWith("pageerror")), []);
  } finally {
    await browser.close();
    await server.close();
  }
});
