// Dependency rules, checked by `npm run lint` (scripts/check-dependencies.mjs), which first
// proves on scripts/dependency-fixtures/ that each rule still fires.

/**
 * Source trees that must run outside Node (a browser, a worker, another runtime): they may import
 * no Node built-in (`node:fs`, `fs`, ...). Paths from the repository root, as regular expressions.
 * The rule reads each file's own imports, so what a portable file imports must be node-free too.
 * A new portable package or folder is one line here. All of @infer/wasm is portable but
 * platform/node.ts, the Node side of its one platform seam ("#platform", issue #22).
 */
export const PORTABLE = [
  "^packages/core/src/(?!node/|testing/)",
  "^packages/formats/src/(?!node/)",
  "^packages/wasm/src/(?!platform/node\\.ts$)",
  // @infer/hub/browser and what it imports.
  "^packages/hub/src/(aliases|browser|listing|model-url|ref|select)\\.ts$",
  "^packages/web/src/app/",
];

const folderCycle = {
  name: "no-folder-cycle",
  comment: "Folders depend one way (in @infer/wasm: load -> arch -> engine -> kernels): two folders must not import each other, even through different files.",
  severity: "error",
  scope: "folder",
};

export default {
  forbidden: [
    {
      name: "no-file-cycle",
      comment: "A module must not import itself through others (type-only imports count): move the shared piece where both can import it.",
      severity: "error",
      from: {},
      to: { circular: true },
    },
    { ...folderCycle, from: {}, to: { circular: true } },
    {
      name: "portable-imports-no-node",
      comment: "Portable code (PORTABLE in .dependency-cruiser.mjs) must not import Node built-ins.",
      severity: "error",
      from: { path: PORTABLE },
      to: { dependencyTypes: ["core"] },
    },
  ],
  options: {
    // Type-only imports are dependencies too: a cycle of types is still a cycle of modules.
    tsPreCompilationDeps: true,
    doNotFollow: { path: "node_modules" },
    exclude: { path: "(^|/)(dist|node_modules)/" },
  },
};
