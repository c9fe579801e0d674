/**
 * The two extensions @peculiar/x509 cannot build as v4's OpenSSL profile has them, encoded by hand
 * (DER, RFC 5280 §4.2.1.1 and §4.2.1.10): nameConstraints (no class in the library) and an
 * authorityKeyIdentifier with keyid *and* issuer + serial (the library's class takes one or the
 * other).
 */

function length(size: number): Buffer {
  if (size < 0x80) return Buffer.from([size]);
  const bytes: number[] = [];
  for (let rest = size; rest > 0; rest = Math.floor(rest / 256)) bytes.unshift(rest % 256);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

function tlv(tag: number, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag]), length(body.length), body]);
}

const SEQUENCE = 0x30;

/** DER INTEGER content of a positive serial given in hex (a 0x00 is prepended if the top bit is set). */
function positiveInteger(hex: string): Buffer {
  let bytes = Buffer.from(hex.length % 2 === 0 ? hex : `0${hex}`, 'hex');
  while (bytes.length > 1 && bytes[0] === 0 && (bytes[1] ?? 0) < 0x80) bytes = bytes.subarray(1);
  return (bytes[0] ?? 0) >= 0x80 ? Buffer.concat([Buffer.from([0]), bytes]) : bytes;
}

/** nameConstraints value: permitted subtrees only, one dNSName and optionally IPv4 address/mask pairs. */
export function nameConstraintsValue(permittedDns: string, permittedIps: ReadonlyArray<{ address: string; mask: string }>): Buffer {
  const ipv4 = (text: string): Buffer => Buffer.from(text.split('.').map((part) => Number(part)));
  const subtrees = [
    tlv(SEQUENCE, tlv(0x82, Buffer.from(permittedDns, 'ascii'))), // [2] dNSName, IA5String
    ...permittedIps.map(({ address, mask }) => tlv(SEQUENCE, tlv(0x87, ipv4(address), ipv4(mask)))), // [7] iPAddress
  ];
  return tlv(SEQUENCE, tlv(0xa0, ...subtrees)); // permittedSubtrees [0] IMPLICIT
}

/**
 * authorityKeyIdentifier value with keyIdentifier [0], authorityCertIssuer [1] (the issuing
 * certificate's own issuer name, as directoryName [4]) and authorityCertSerialNumber [2] (the
 * issuing certificate's serial), as OpenSSL writes for `keyid,issuer`.
 */
export function authorityKeyIdentifierValue(keyIdHex: string, issuerOfIssuerName: ArrayBuffer, issuerSerialHex: string): Buffer {
  return tlv(
    SEQUENCE,
    tlv(0x80, Buffer.from(keyIdHex, 'hex')),
    tlv(0xa1, tlv(0xa4, Buffer.from(issuerOfIssuerName))),
    tlv(0x82, positiveInteger(issuerSerialHex)),
  );
}
