/**
 * The bin's OpenTelemetry SDK (README › Tracing): a Node tracer provider exporting over OTLP/HTTP
 * (JSON) in batches, registered when the standard variables ask for it (`tracingRequested`), so
 * that the gateway's spans (tracing.ts) and its clients' share traces. Imported by main.ts only
 * then: a gateway without OTEL_* variables loads none of the SDK (lazy-imports.test.ts). The
 * exporter reads the rest of the OTEL_EXPORTER_OTLP_* variables (endpoint, headers, timeout) and the
 * batch processor OTEL_BSP_*; the resource takes OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
 */
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';

/** The service name without OTEL_SERVICE_NAME (or a service.name in OTEL_RESOURCE_ATTRIBUTES). */
export const DEFAULT_SERVICE_NAME = 'eventflow-gateway';

export interface TracingSdk {
  /** Exports the spans still buffered, then stops (the gateway's shutdown). */
  shutdown(): Promise<void>;
}

/** Registers the SDK globally (tracer provider, AsyncLocalStorage context, W3C propagation). */
export function startTracingSdk(env: NodeJS.ProcessEnv): TracingSdk {
  const named = env.OTEL_SERVICE_NAME !== undefined || /(^|,)\s*service\.name\s*=/.test(env.OTEL_RESOURCE_ATTRIBUTES ?? '');
  const resource = defaultResource()
    .merge(named ? null : resourceFromAttributes({ 'service.name': DEFAULT_SERVICE_NAME }))
    .merge(detectResources({ detectors: [envDetector] }));
  const provider = new NodeTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())] });
  provider.register();
  return { shutdown: () => provider.shutdown() };
}
