/** Which model a URL names: a Hugging Face folder (its files fetched by name) or one GGUF file. */

/**
 * The folder URL (ending with "/") when url names a folder: it ends with "/", or names config.json
 * or a .safetensors file in it; undefined for a GGUF file. Loading and the cache both key a folder
 * by this URL, so any of its forms finds the same entry.
 */
export function folderUrlOf(url: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return undefined; // not a URL: nothing a folder was loaded from
  }
  const path = parsed.pathname;
  if (path.endsWith("/")) return new URL(path, parsed).href;
  if (path.endsWith(".safetensors") || path.endsWith("config.json")) return new URL(path.slice(0, path.lastIndexOf("/") + 1), parsed).href;
  return undefined;
}
