// Where a campaign lays its cases out for the child. Each layout (the mutated file names, and for a Hugging
// Face or PEFT case the seed folder whose other files are linked in) gets a folder once; a case then only writes
// its mutated files into it. Two sets of folders alternate, so the next case is written while the child
// still reads the current one.
import { mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { HF_FILES } from "./seeds.mjs";

export class CaseDirs {
  /** `root`: a folder of this slot's own. */
  constructor(root) {
    this.root = root;
    this.folders = new Map();
    this.turn = 0;
  }

  /**
   * Writes a case's files (and links the seed's other `linkNames`, the first time); returns the folder. Each file
   * is written beside its place and renamed over it: a new file every case, as a fresh folder would hold,
   * never one the child still has open or mapped from the case before.
   */
  write(files, links, linkNames = HF_FILES) {
    this.turn ^= 1;
    const names = Object.keys(files);
    const key = `${this.turn}|${names.join("|")}|${links ?? ""}`;
    let dir = this.folders.get(key);
    if (!dir) {
      dir = join(this.root, String(this.folders.size));
      rmSync(dir, { recursive: true, force: true });
      mkdirSync(dir, { recursive: true });
      if (links) for (const name of linkNames) if (!(name in files)) symlinkSync(join(links, name), join(dir, name));
      this.folders.set(key, dir);
    }
    for (const name of names) {
      const path = join(dir, name);
      writeFileSync(`${path}.next`, files[name]);
      renameSync(`${path}.next`, path);
    }
    return dir;
  }
}
