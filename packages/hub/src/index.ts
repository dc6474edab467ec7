// @infer/hub: aliases, Hugging Face compatible downloads and the local model cache.
export { registerAlias, resolveAlias, listAliases } from "./aliases.js";
export { cacheDir, repoDir } from "./cache.js";
export { discover, discoverModels, type DiscoveredModel } from "./discovery.js";
export { downloadFile, type DownloadProgress, type DownloadRequest, type DownloadResult } from "./download.js";
export { connectionFromEnv, fileUrl, listRepoFiles, type HubConnection, type RepoFile } from "./listing.js";
export { cachedPath, pull, refOfCachedPath, removeCached, resolveModel, type PullOptions, type PullResult, type ResolveOptions } from "./pull.js";
export { hubRefOf, resolveModelUrl } from "./model-url.js";
export { formatHubRef, parseHubRef, type HubRef } from "./ref.js";
export { GGUF_PREFERENCE, selectFiles, type Selection } from "./select.js";
