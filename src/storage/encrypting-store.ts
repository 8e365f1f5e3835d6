import { CheckpointCorruptedError } from '../contract/errors';
import type { CheckpointStore } from '../contract/checkpoint-store';
import { CodecCheckpointStore } from './codec-store';
import { type CheckpointPayloadCodec, type PayloadSlot, slotBinding, slotSequence } from './payload-codec';
import { PayloadCipher, PayloadOpenError, type EncryptionOptions } from './payload-cipher';
import { Reencryptor, type ReencryptAllOptions, type ReencryptAllReport, type ReencryptOptions, type ReencryptReport } from './reencryption';

export type { EncryptionOptions } from './payload-cipher';
export type { ReencryptAllOptions, ReencryptAllReport, ReencryptOptions, ReencryptReport } from './reencryption';

/**
 * Encrypts payloads at rest (run input, step outputs and memories, operation results and errors) with
 * AES-256-GCM around any other store: a `CodecCheckpointStore` whose codec is the cipher below. Each ciphertext names its key id, so keys rotate by adding a new
 * active key while old rows stay readable with the old one, and is bound (as additional authenticated
 * data) to its run, sequence and field, so a ciphertext moved to another row fails to decrypt.
 * Identifiers, statuses and timestamps stay in clear text so runs can be listed and leased.
 *
 * Retiring a key: make the new key active (keeping the old one), then `reencryptRun` / `reencryptAll`
 * (or `waypoint-durable reencrypt`) rewrite what the old key sealed; once they report nothing unreadable, the old
 * key can go.
 *
 * @example
 * const waypoint = await Waypoint.create({ encryption: { activeKeyId: 'k2', keys: { k1: oldKey, k2: newKey } } });
 * await (waypoint.store as EncryptingCheckpointStore).reencryptAll(); // then drop k1 from the keys
 */
export class EncryptingCheckpointStore extends CodecCheckpointStore {
  private readonly cipher: PayloadCipher;

  constructor(inner: CheckpointStore, options: EncryptionOptions) {
    const cipher = new PayloadCipher(options);
    super(inner, cipherCodec(cipher));
    this.cipher = cipher;
  }

  /** The key id new payloads are sealed with. */
  get activeKeyId(): string {
    return this.cipher.activeKeyId;
  }

  /**
   * Key rotation for one run: every payload not sealed under the active key (an older key's, or clear
   * text written before encryption was enabled) is opened and sealed again under the active key, bound to
   * the same record; a compare-and-swap, so a value changed meanwhile is left to its writer (`skipped`).
   * A value that cannot be opened is never rewritten: the rest of the run is, then
   * `CheckpointCorruptedError` names it. Throws `RunNotFoundError` for an unknown run.
   *
   * @example
   * const { rewritten, alreadyCurrent, skipped } = await store.reencryptRun('q3-aapl');
   */
  reencryptRun(runId: string, options?: ReencryptOptions): Promise<ReencryptReport> {
    return new Reencryptor(this.inner, this.cipher).run(runId, options);
  }

  /**
   * `reencryptRun` for every run (or those `filter` selects), one at a time; runs with a value that
   * cannot be opened are listed in `unreadable` and the others go on.
   *
   * @example
   * const { runs, unreadable } = await store.reencryptAll({ onRun: (runId) => console.log(runId) });
   * if (unreadable.length === 0) console.log('every run is sealed under', store.activeKeyId);
   */
  reencryptAll(options?: ReencryptAllOptions): Promise<ReencryptAllReport> {
    return new Reencryptor(this.inner, this.cipher).all(options);
  }
}

/**
 * The AES-256-GCM codec: seals with the active key, bound to the slot (`slotBinding`); opens with the
 * key an envelope names. Clear text written before encryption was enabled is read as is; a value that
 * does not open is a `CheckpointCorruptedError` naming its run and row.
 */
export function cipherCodec(cipher: PayloadCipher): CheckpointPayloadCodec {
  return {
    encode: (text: string, slot: PayloadSlot) => cipher.sealText(text, slotBinding(slot)),
    decode: (text: string, slot: PayloadSlot) => {
      try {
        return cipher.openText(text, slotBinding(slot));
      } catch (error) {
        if (error instanceof PayloadOpenError) throw new CheckpointCorruptedError(slot.runId, slotSequence(slot), error.message);
        throw error;
      }
    },
  };
}
