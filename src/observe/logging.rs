//! Logs on standard error (text for people, JSON for collectors) and, when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, traces
//! exported over OTLP.

use std::io::IsTerminal as _;

use anyhow::Context as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_appender::non_blocking::WorkerGuard;
use tracing_subscriber::filter::{FilterExt as _, filter_fn};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// For people at a terminal (coloured there).
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

impl LogFormat {
    /// JSON unless standard error is a terminal.
    pub fn detect() -> LogFormat {
        if std::io::stderr().is_terminal() {
            LogFormat::Text
        } else {
            LogFormat::Json
        }
    }
}

/// What traces include unless `CASEFILE_TRACE_FILTER` says otherwise: requests and operations
/// (info) and, below them, casefile's DataLoader batches and SQL statements (debug).
const DEFAULT_TRACE_FILTER: &str = "info,casefile=debug";

/// Keeps the log writer and the trace exporter running; dropping it writes the lines and sends
/// the spans still buffered.
pub struct Telemetry {
    tracer: Option<SdkTracerProvider>,
    _log_writer: WorkerGuard,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(tracer) = self.tracer.take()
            && let Err(err) = tracer.shutdown()
        {
            eprintln!("casefile: could not send the last traces: {err}");
        }
    }
}

/// Installs the process's logging (filtered by `RUST_LOG`, default `info`) and, if an OTLP
/// endpoint is configured, its trace export. W3C trace context (`traceparent`) is understood
/// either way, so log lines carry the caller's trace id.
pub fn init(format: Option<LogFormat>) -> anyhow::Result<Telemetry> {
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let format = format.unwrap_or_else(LogFormat::detect);
    // Lines are written by a thread of their own: a slow reader of standard error must not
    // stall the runtime (past 128k lines behind, lines are dropped instead).
    let (writer, log_writer) = tracing_appender::non_blocking(std::io::stderr());
    // Log lines are events; spans are for traces (formatting their fields for logs that never
    // print them cost every request).
    let log_filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info"))
        .and(filter_fn(|metadata| metadata.is_event()));
    let logs = match format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(writer)
            .with_ansi(std::io::stderr().is_terminal())
            .with_filter(log_filter)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .with_writer(writer)
            .with_filter(log_filter)
            .boxed(),
    };
    let tracer = otlp_tracer()?;
    // Two subscribers rather than an optional layer: a missing (`None`) layer counts as
    // interested in everything, which made every debug span and event (sqlx formats each
    // statement for one) cost every request.
    let installed = match &tracer {
        Some(provider) => {
            let filter = std::env::var("CASEFILE_TRACE_FILTER")
                .ok()
                .and_then(|f| EnvFilter::try_new(f).ok())
                .unwrap_or_else(|| EnvFilter::new(DEFAULT_TRACE_FILTER));
            let traces = tracing_opentelemetry::layer()
                .with_tracer(provider.tracer("casefile"))
                .with_filter(filter);
            tracing::subscriber::set_global_default(
                tracing_subscriber::registry().with(logs).with(traces),
            )
        }
        None => tracing::subscriber::set_global_default(tracing_subscriber::registry().with(logs)),
    };
    installed.context("cannot install logging")?;
    // Dependencies that log through `log` rather than `tracing`: their warnings and errors.
    // (Letting their debug records through as well hung the embedded database's start-up
    // whenever trace export enabled debug spans.)
    tracing_log::LogTracer::builder()
        .with_max_level(log::LevelFilter::Warn)
        .init()
        .context("cannot install logging")?;
    if tracer.is_some() {
        tracing::info!("exporting traces over OTLP");
    }
    Ok(Telemetry {
        tracer,
        _log_writer: log_writer,
    })
}

/// The OTLP trace pipeline, when an endpoint is configured (the exporter reads the standard
/// `OTEL_EXPORTER_OTLP_*` variables; `OTEL_SERVICE_NAME` defaults to `casefile`).
fn otlp_tracer() -> anyhow::Result<Option<SdkTracerProvider>> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let configured = env("OTEL_EXPORTER_OTLP_ENDPOINT")
        .or_else(|| env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
        .is_some();
    let disabled = env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
        || env("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"));
    if !configured || disabled {
        return Ok(None);
    }
    let protocol = [
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ]
    .iter()
    .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()));
    let protocol = match protocol.as_deref() {
        // The specification's default.
        None | Some("http/protobuf") => Protocol::HttpBinary,
        Some("http/json") => Protocol::HttpJson,
        // Telemetry settings must not keep the server from serving.
        Some(other) => {
            eprintln!(
                "casefile: not exporting traces: OTLP protocol {other:?} is not supported (use \
                 http/protobuf, a collector's port 4318, or http/json)"
            );
            return Ok(None);
        }
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(protocol)
        .build()
        .context("cannot set up the OTLP trace exporter")?;
    // The standard variables name the service when they do; else it is casefile.
    let mut resource = Resource::builder();
    let named = env("OTEL_SERVICE_NAME").is_some()
        || env("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|a| a.contains("service.name="));
    if !named {
        resource = resource.with_service_name("casefile");
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            resource
                .with_attribute(opentelemetry::KeyValue::new(
                    "service.version",
                    env!("CARGO_PKG_VERSION"),
                ))
                .build(),
        )
        .build();
    opentelemetry::global::set_tracer_provider(provider.clone());
    Ok(Some(provider))
}
