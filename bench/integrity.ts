import { randomBytes } from 'node:crypto';
import type { Backend, BenchEnvironment } from './environment';
import { section, type Section } from './report';
import { addVariantRows, measureVariants, type Variant } from './variants';

/**
 * Figure 7 (issue 6): what sealing and encrypting each step row costs per step, beside the plain write
 * (SHA-256, always on): HMAC-SHA-256 with `hmacKey`, and AES-256-GCM encryption of every payload. On the
 * memory store the figure is the CPU cost alone; on PostgreSQL it is seen against a real commit.
 */
export async function integrityFigure(env: BenchEnvironment, options: { quick: boolean }, progress: (line: string) => void): Promise<Section> {
  const rounds = options.quick ? 3 : 7;
  const out = section(
    'integrity',
    'Integrity options: per-step cost beside the plain write',
    `1 KB flat step; median of ${rounds} interleaved rounds (min–max); ratio = per-round variant / plain`,
    ['backend', 'variant', 'per step', 'extra', 'ratio to plain', ''],
  );
  const variants: Variant[] = [
    { label: 'plain (SHA-256)', setup: {} },
    { label: 'HMAC-SHA-256 (hmacKey)', setup: { options: { hmacKey: randomBytes(32) } } },
    { label: 'AES-256-GCM encryption', setup: { options: { encryption: { keys: { k1: randomBytes(32) }, activeKeyId: 'k1' } } } },
  ];
  const backends: [Backend, number][] = [
    ['memory', options.quick ? 300 : 2000],
    ['postgres', options.quick ? 60 : 150],
  ];
  for (const [backend, steps] of backends) {
    progress(`integrity: ${backend}`);
    try {
      addVariantRows(out, backend, await measureVariants(env, backend, variants, rounds, steps, 'integ'), () => '');
    } catch (error) {
      out.rows.push([backend, 'unavailable', String((error as Error).message).slice(0, 100)]);
    }
  }
  return out;
}
