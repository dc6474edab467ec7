/**
 * A Hugging Face model folder's companion files: generation_config.json eos
 * lists, config.json ids, chat_template.jinja, and tokenizer_config.json's
 * named-template list.
 */
import assert from "node:assert/strict";
import { copyFile, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { loadTokenizer } from "../../src/tokenizer/index.js";
import { referenceFiles } from "./helpers.js";

describe("Hugging Face model folder", () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "infer-hf-folder-"));
    await copyFile(join(referenceFiles("llama2").folder, "tokenizer.json"), join(dir, "tokenizer.json"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("collects eos ids from generation_config (a list), config.json and tokenizer_config", async () => {
    await writeFile(
      join(dir, "tokenizer_config.json"),
      JSON.stringify({ bos_token: "<s>", eos_token: { content: "</s>" }, add_bos_token: false, add_eos_token: true }),
    );
    await writeFile(join(dir, "generation_config.json"), JSON.stringify({ eos_token_id: [13, 2] }));
    await writeFile(join(dir, "config.json"), JSON.stringify({ bos_token_id: 1, eos_token_id: 29889 }));
    const tokenizer = await loadTokenizer(dir);
    // The configured eos token first (the one encode appends), then the generation config's.
    assert.equal(tokenizer.eosId, 2);
    assert.deepEqual(tokenizer.eosIds, [2, 13, 29889]);
    assert.equal(tokenizer.bosId, 1);
    assert.equal(tokenizer.addBos, false);
    assert.deepEqual(tokenizer.encode("hi"), [...tokenizer.encode("hi", { addSpecialTokens: false }), 2]);
    assert.ok(tokenizer.isEndOfGeneration(13) && !tokenizer.isEndOfGeneration(1));
  });

  it("takes the chat template from chat_template.jinja, else the config's (named list: default)", async () => {
    await writeFile(
      join(dir, "tokenizer_config.json"),
      JSON.stringify({
        bos_token: "<s>",
        chat_template: [
          { name: "tool_use", template: "tools" },
          { name: "default", template: "{{ bos_token }}{{ messages[0].content }}" },
        ],
      }),
    );
    const fromConfig = await loadTokenizer(join(dir, "tokenizer.json"));
    assert.equal(fromConfig.renderChat([{ role: "user", content: "hey" }]), "<s>hey");

    await writeFile(join(dir, "chat_template.jinja"), "{% for m in messages %}{{ m.role }}={{ m.content }};{% endfor %}{{ oops(");
    const fromFile = await loadTokenizer(dir);
    assert.throws(
      () => fromFile.renderChat([{ role: "user", content: "hey" }]),
      (error: Error & { code?: string }) => error.code === "MODEL_FORMAT" && error.message.includes("chat_template.jinja"),
    );
    await writeFile(join(dir, "chat_template.jinja"), "{% for m in messages %}{{ m.role }}={{ m.content }};{% endfor %}");
    assert.equal((await loadTokenizer(dir)).renderChat([{ role: "user", content: "hey" }]), "user=hey;");
  });
});
