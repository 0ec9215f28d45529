import { experimental, type ServerCredentials } from "@grpc/grpc-js";
import { createPrivateKey, X509Certificate } from "node:crypto";
import { createSecureContext } from "node:tls";
import type { Logger } from "pino";
import { errorMessage } from "../../../lib/errors.js";
import { WatchedFiles } from "../../../lib/watched-files.js";

export interface TlsOptions {
  readonly certFile: string;
  readonly keyFile: string;
  /** With a client CA, clients must present a certificate it signed (mTLS). */
  readonly clientCaFile: string | undefined;
  readonly reloadIntervalMs: number;
}

/** Checked certificates as the HTTP front door takes them (node:tls options), and their rotations. */
export class TlsMaterial {
  private listeners: ((material: TlsFiles) => void)[] = [];

  constructor(
    public current: TlsFiles,
    /** Clients must present a certificate the CA signed. */
    readonly mutual: boolean,
  ) {}

  onChange(listener: (material: TlsFiles) => void): void {
    this.listeners.push(listener);
  }

  update(material: TlsFiles): void {
    this.current = material;
    for (const listener of this.listeners) listener(material);
  }
}

export interface TlsFiles {
  readonly cert: Buffer;
  readonly key: Buffer;
  readonly ca: Buffer | undefined;
}

/**
 * TLS (and mTLS) for the gRPC server and the HTTP front door whose certificates follow the files: when a Secret
 * rotates, new connections get the new certificate and open connections carry on. Each
 * new set is checked (the key matches the certificate, Node accepts them together)
 * before it is used, so a broken rotation never takes TLS down.
 */
export async function reloadingTlsCredentials(
  options: TlsOptions,
  logger: Logger,
): Promise<{ credentials: ServerCredentials; material: TlsMaterial; stop(): void }> {
  const identity = new PushedCertificates();
  const clientCa = options.clientCaFile === undefined ? null : new PushedCertificates();
  const paths = [
    options.certFile,
    options.keyFile,
    ...(options.clientCaFile === undefined ? [] : [options.clientCaFile]),
  ];
  let material: TlsMaterial | undefined;
  const watched = await WatchedFiles.watch(
    paths,
    { intervalMs: options.reloadIntervalMs, logger, what: "TLS certificate" },
    ([certificate, privateKey, ca]) => {
      checkCertificates(options, certificate!, privateKey!, ca);
      identity.pushIdentity({ certificate: certificate!, privateKey: privateKey! });
      if (ca !== undefined) clientCa?.pushCa({ caCertificate: ca });
      const files = { cert: certificate!, key: privateKey!, ca };
      if (material === undefined) material = new TlsMaterial(files, ca !== undefined);
      else material.update(files);
    },
  ).catch((error: unknown) => {
    throw new Error(`TLS: ${errorMessage(error)}`);
  });
  // grpc-js names the parameters (ca, identity), but the constructor takes (identity, ca).
  const credentials = experimental.createCertificateProviderServerCredentials(identity, clientCa, clientCa !== null);
  return { credentials, material: material!, stop: () => watched.stop() };
}

function checkCertificates(options: TlsOptions, certificate: Buffer, privateKey: Buffer, ca: Buffer | undefined): void {
  let parsed: X509Certificate;
  try {
    parsed = new X509Certificate(certificate);
  } catch (error) {
    throw new Error(`${options.certFile} is not a PEM certificate: ${errorMessage(error)}`);
  }
  let key: ReturnType<typeof createPrivateKey>;
  try {
    key = createPrivateKey(privateKey);
  } catch (error) {
    throw new Error(`${options.keyFile} is not a PEM private key: ${errorMessage(error)}`);
  }
  if (!parsed.checkPrivateKey(key)) {
    throw new Error(`${options.keyFile} is not the private key of the certificate in ${options.certFile}`);
  }
  if (ca !== undefined) {
    try {
      new X509Certificate(ca);
    } catch (error) {
      throw new Error(`${options.clientCaFile} is not a PEM CA certificate: ${errorMessage(error)}`);
    }
  }
  createSecureContext({ cert: certificate, key: privateKey, ca });
}

/** A grpc-js CertificateProvider we push checked certificates into. */
class PushedCertificates implements experimental.CertificateProvider {
  private ca: experimental.CaCertificateUpdate | null = null;
  private identity: experimental.IdentityCertificateUpdate | null = null;
  private readonly caListeners = new Set<experimental.CaCertificateUpdateListener>();
  private readonly identityListeners = new Set<experimental.IdentityCertificateUpdateListener>();

  pushCa(update: experimental.CaCertificateUpdate): void {
    this.ca = update;
    for (const listener of this.caListeners) listener(update);
  }

  pushIdentity(update: experimental.IdentityCertificateUpdate): void {
    this.identity = update;
    for (const listener of this.identityListeners) listener(update);
  }

  addCaCertificateListener(listener: experimental.CaCertificateUpdateListener): void {
    this.caListeners.add(listener);
    deliverSoon(() => this.caListeners.has(listener) && listener(this.ca));
  }

  removeCaCertificateListener(listener: experimental.CaCertificateUpdateListener): void {
    this.caListeners.delete(listener);
  }

  addIdentityCertificateListener(listener: experimental.IdentityCertificateUpdateListener): void {
    this.identityListeners.add(listener);
    deliverSoon(() => this.identityListeners.has(listener) && listener(this.identity));
  }

  removeIdentityCertificateListener(listener: experimental.IdentityCertificateUpdateListener): void {
    this.identityListeners.delete(listener);
  }
}

/**
 * grpc-js subscribes to the provider before it starts watching for the result, so the
 * current certificates are handed over on the next tick, as its own file provider does.
 */
const deliverSoon = (deliver: () => void): void => queueMicrotask(deliver);
