import { InferenceError } from "@infer/core";

/** A model on a Hugging Face compatible hub. */
export interface HubRef {
  /** "org/name" */
  repo: string;
  /** Branch, tag or commit; default "main". */
  revision: string;
  /** A quantization tag ("Q8_0", "Q4_K_M") choosing among GGUF files. */
  quant?: string;
  /** One exact file of the repository (a `.gguf`). */
  file?: string;
}

const REPO_PART = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/**
 * Parses `hf:org/repo`, `hf:org/repo:Q8_0`, `hf:org/repo:file.gguf` and
 * `hf:org/repo@revision[:...]`. Returns undefined for anything not starting with `hf:`.
 */
export function parseHubRef(spec: string): HubRef | undefined {
  if (!spec.startsWith("hf:")) return undefined;
  const body = spec.slice(3);
  const colon = body.indexOf(":");
  const repoPart = colon < 0 ? body : body.slice(0, colon);
  const selector = colon < 0 ? undefined : body.slice(colon + 1);
  const [repo, revision = "main", ...extra] = repoPart.split("@");
  const parts = (repo ?? "").split("/");
  if (extra.length || parts.length !== 2 || !parts.every((p) => REPO_PART.test(p) && p !== "." && p !== "..") || !revision) {
    throw new InferenceError(
      "INVALID_OPTION",
      `'${spec}' is not a hub reference; write hf:org/repo, hf:org/repo:Q8_0 or hf:org/repo:file.gguf`,
      { details: { spec } },
    );
  }
  if (selector === undefined || selector === "") return { repo: repo!, revision };
  if (selector.split("/").some((seg) => seg === ".." || seg === "")) {
    throw new InferenceError("INVALID_OPTION", `'${spec}': the file part must be a path inside the repository`, { details: { spec } });
  }
  return selector.toLowerCase().endsWith(".gguf") ? { repo: repo!, revision, file: selector } : { repo: repo!, revision, quant: selector };
}

export function formatHubRef(ref: HubRef): string {
  const rev = ref.revision === "main" ? "" : `@${ref.revision}`;
  const sel = ref.file ?? ref.quant;
  return `hf:${ref.repo}${rev}${sel ? `:${sel}` : ""}`;
}
