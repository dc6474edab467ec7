import { loadModel } from "@infer/core";
import "@infer/core/node";
import "@infer/wasm";
import "@infer/llama-cpp";
const [backend, path] = process.argv.slice(2);
const s = performance.now();
setTimeout(() => { console.log("TIMEOUT"); process.exit(3); }, 60000);
try { const m = await loadModel(path, { backend, threads: 1 }); console.log("LOADED", (await m.generateText("hi", { maxTokens: 2 })).text.length); await m.close(); }
catch (e) { console.log(backend, e.code, e.message.slice(0, 250)); }
console.log(Math.round(performance.now() - s), "ms; rss MiB", Math.round(process.memoryUsage().rss / 2**20));
process.exit(0);
