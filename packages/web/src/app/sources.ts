/**
 * What the user typed in the model box, turned into a URL the engine downloads: an http(s) URL
 * as it is, a relative one against the page, or `hf:org/repo[:quant|:file.gguf]` resolved to the
 * hub's file URL (the hub answers with CORS headers, so a page may read it).
 */
import { InferenceError } from "@infer/core";
import { fileUrl, type HubConnection, listRepoFiles, parseHubRef, selectFiles } from "@infer/hub/remote";

export const HUB: HubConnection = { endpoint: "https://huggingface.co" };

const refused = (message: string) => new InferenceError("INVALID_OPTION", message, { details: { field: "model" } });

export async function resolveModelUrl(text: string, base: string, hub: HubConnection = HUB): Promise<string> {
  const spec = text.trim();
  if (spec === "") throw refused("type a model URL or an hf:org/repo reference");
  const ref = parseHubRef(spec);
  if (ref) {
    const selection = selectFiles(ref, await listRepoFiles(hub, ref));
    if (selection.format !== "gguf") throw refused(`${ref.repo} has no GGUF file; the web app loads GGUF models`);
    if (selection.files.length > 1) throw refused(`${selection.files[0]!.path} is split into ${selection.files.length} files, which the web app cannot load yet`);
    return fileUrl(hub, ref, selection.files[0]!.path);
  }
  let url: URL;
  try {
    url = new URL(spec, base);
  } catch {
    throw refused(`'${spec}' is neither a URL nor an hf:org/repo reference`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw refused(`'${spec}' is not an http(s) URL`);
  return url.href;
}
