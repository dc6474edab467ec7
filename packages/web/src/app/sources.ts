/**
 * What the user typed in the model box, turned into a URL the engine downloads: an http(s) URL
 * as it is, a relative one against the page, or an `hf:org/repo[:quant|:file.gguf]` reference
 * (or an alias) resolved by @infer/hub to the hub's file URL (the hub answers with CORS headers,
 * so a page may read it).
 */
import { InferenceError } from "@infer/core";
import { type HubConnection, hubRefOf, resolveModelUrl as resolveHubUrl } from "@infer/hub/browser";

const refused = (message: string) => new InferenceError("INVALID_OPTION", message, { details: { field: "model" } });

export async function resolveModelUrl(text: string, base: string, hub: Partial<HubConnection> = {}): Promise<string> {
  const spec = text.trim();
  if (spec === "") throw refused("type a model URL or an hf:org/repo reference");
  if (hubRefOf(spec)) return resolveHubUrl(spec, hub);
  let url: URL;
  try {
    url = new URL(spec, base);
  } catch {
    throw refused(`'${spec}' is neither a URL nor an hf:org/repo reference`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw refused(`'${spec}' is not an http(s) URL`);
  return url.href;
}
