import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { WaypointError } from '../contract/errors';
import type { EncryptionOptions } from '../contract/options';

export type { EncryptionOptions } from '../contract/options';

/** Envelope prefix of every encrypted payload Waypoint writes (store rows, LangGraph records). */
export const ENVELOPE_PREFIX = 'wpenc:1:';

/** Why a sealed payload could not be opened; the saver turns it into a corruption error naming the record. */
export class PayloadOpenError extends Error {}

/**
 * AES-256-GCM sealing of payloads in Waypoint's one envelope format:
 * `wpenc:1:<keyId>:<iv base64>:<tag base64>:<ciphertext base64>`. Each envelope names its key id
 * (rotation: add a key, make it active, keep the old one to read old rows) and is bound to its record by
 * the additional authenticated data, so a payload copied onto another record fails to open. Used by
 * `EncryptingCheckpointStore` and the LangGraph saver.
 *
 * @example
 * const cipher = new PayloadCipher({ activeKeyId: 'k1', keys: { k1: randomBytes(32) } });
 * const sealed = cipher.seal(Buffer.from('hello'), 'thread-1:blob');
 * cipher.open(sealed, 'thread-1:blob').toString(); // 'hello'
 */
export class PayloadCipher {
  private readonly keys: Map<string, Buffer>;
  /** The key id new payloads are sealed with. */
  readonly activeKeyId: string;

  constructor(options: EncryptionOptions) {
    this.keys = new Map(
      Object.entries(options.keys).map(([id, key]) => {
        const bytes = Buffer.isBuffer(key) ? key : Buffer.from(key, 'base64');
        if (bytes.length !== 32) throw new WaypointError('INVALID_KEY', `Encryption key '${id}' must be 32 bytes (AES-256), got ${bytes.length}.`);
        if (id === '' || id.includes(':')) throw new WaypointError('INVALID_KEY', `Encryption key id '${id}' must be non-empty and must not contain ':'.`);
        return [id, bytes];
      }),
    );
    if (!this.keys.has(options.activeKeyId)) {
      throw new WaypointError('INVALID_KEY', `activeKeyId '${options.activeKeyId}' is not among the configured keys (${[...this.keys.keys()].join(', ')}).`);
    }
    this.activeKeyId = options.activeKeyId;
  }

  seal(plain: Uint8Array, aad: string): Uint8Array {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.keys.get(this.activeKeyId)!, iv);
    cipher.setAAD(Buffer.from(aad));
    const body = Buffer.concat([cipher.update(plain), cipher.final()]);
    const envelope = `${ENVELOPE_PREFIX}${this.activeKeyId}:${iv.toString('base64')}:${cipher.getAuthTag().toString('base64')}:${body.toString('base64')}`;
    return Buffer.from(envelope, 'utf8');
  }

  /** Opens an envelope; throws PayloadOpenError when the key is unknown or authentication fails. */
  open(sealed: Uint8Array, aad: string): Buffer {
    const text = Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength).toString('utf8');
    if (!text.startsWith(ENVELOPE_PREFIX)) throw new PayloadOpenError('it is marked encrypted but holds no encryption envelope');
    const [keyId = '', iv = '', tag = '', body = ''] = text.slice(ENVELOPE_PREFIX.length).split(':');
    const key = this.keys.get(keyId);
    if (!key) throw new PayloadOpenError(`it is encrypted with key id '${keyId}', which is not configured; add that key to 'encryption.keys'`);
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64'));
      decipher.setAAD(Buffer.from(aad));
      decipher.setAuthTag(Buffer.from(tag, 'base64'));
      return Buffer.concat([decipher.update(Buffer.from(body, 'base64')), decipher.final()]);
    } catch {
      throw new PayloadOpenError(`decryption with key id '${keyId}' failed: the key is wrong or the stored bytes were altered`);
    }
  }

  /** Seals a text payload; the envelope is text too. */
  sealText(plain: string, aad: string): string {
    return Buffer.from(this.seal(Buffer.from(plain, 'utf8'), aad)).toString('utf8');
  }

  /**
   * The key id an envelope names, or null for text that holds no envelope (written before encryption
   * was enabled). It does not check that the envelope opens.
   *
   * @example
   * cipher.keyIdOf(cipher.sealText('hello', 'run-1:input')) === cipher.activeKeyId; // true
   * cipher.keyIdOf('{"clear":"text"}');                                             // null
   */
  keyIdOf(text: string): string | null {
    if (!text.startsWith(ENVELOPE_PREFIX)) return null;
    const end = text.indexOf(':', ENVELOPE_PREFIX.length);
    return text.slice(ENVELOPE_PREFIX.length, end < 0 ? undefined : end);
  }

  /** Opens a text envelope; text written before encryption was enabled (no envelope) is returned as is. */
  openText(text: string, aad: string): string {
    if (!text.startsWith(ENVELOPE_PREFIX)) return text;
    return this.open(Buffer.from(text, 'utf8'), aad).toString('utf8');
  }
}
