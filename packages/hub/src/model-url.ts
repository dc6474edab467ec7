/**
 * hf: references and aliases resolved to the URL a model loads from, with no local cache: what a
 * browser needs (the Hugging Face hub answers with CORS headers), and @infer/wasm loads by URL.
 */
import { InferenceError } from "@infer/core";
import { resolveAlias } from "./aliases.js";
import { fileUrl, type HubConnection, listRepoFiles } from "./listing.js";
import { type HubRef, parseHubRef } from "./ref.js";
import { selectFiles } from "./select.js";

/** Turns an alias or `hf:` string into a hub reference; undefined for local paths. */
export function hubRefOf(spec: string | HubRef): HubRef | undefined {
  if (typeof spec !== "string") return spec;
  const target = resolveAlias(spec) ?? spec;
  return parseHubRef(target);
}

/**
 * The URL of what `spec` (an `hf:` reference or an alias) selects: its GGUF file, or for a
 * safetensors repository its folder (ending with "/"). A split GGUF is UNSUPPORTED: a URL names one file.
 */
export async function resolveModelUrl(spec: string, options: Partial<HubConnection> = {}): Promise<string> {
  const ref = hubRefOf(spec);
  if (!ref) throw new InferenceError("INVALID_OPTION", `'${spec}' is neither an hf: reference nor an alias`, { details: { spec } });
  const conn: HubConnection = { endpoint: (options.endpoint ?? "https://huggingface.co").replace(/\/+$/, ""), token: options.token, fetch: options.fetch };
  const selection = selectFiles(ref, await listRepoFiles(conn, ref));
  if (selection.format === "safetensors") return fileUrl(conn, ref, "");
  if (selection.files.length > 1) {
    throw new InferenceError("UNSUPPORTED", `${spec} is a GGUF split in ${selection.files.length} files; a URL loads one file`, {
      details: { spec, files: selection.files.map((f) => f.path) },
    });
  }
  return fileUrl(conn, ref, selection.files[0]!.path);
}
