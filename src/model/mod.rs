//! One client for every model-backed tool: the Anthropic Messages API (default) or any
//! OpenAI-compatible chat-completions server, with retries, timeouts, an overall deadline,
//! typed errors and usage accounting. It touches no file but the one a tool hands it (the
//! remembered response formats) and never prints a key.
//! Its requests go through [`crate::net`] (client, redirects, the answer cap, timeouts).

mod anthropic;
pub mod formats;
mod openai;
pub mod print_mode;
pub mod retry;

use std::time::Duration;

use clap::Args;
use serde::Serialize;
use serde_json::Value;

use crate::claude::Env;
use crate::cli::args::EnvNamed;
use crate::cli::duration::parse_duration;
use crate::cli::Failure;
use crate::net;

pub use crate::net::block_on;
pub use crate::net::Secret;
pub use retry::RetryPolicy;

/// The built-in small/fast model when no environment variable names one.
pub const DEFAULT_SMALL_FAST_MODEL: &str = "claude-haiku-4-5";
/// The built-in main model when `ANTHROPIC_MODEL` is unset.
pub const DEFAULT_MAIN_MODEL: &str = "claude-sonnet-4-5";
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
const DEFAULT_ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
const DEFAULT_OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Provider {
    // Plain comments: doc comments would turn `--help`'s one line of values into a list.
    // The Anthropic Messages API, with an API key or token.
    Anthropic,
    // An OpenAI-compatible chat-completions server.
    Openai,
    // The user's own Claude Code (`claude -p`), logged in as they use it: no key needed.
    Claude,
}

/// Which model a task wants when `--model` does not say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// `ANTHROPIC_SMALL_FAST_MODEL`, then `ANTHROPIC_DEFAULT_HAIKU_MODEL`, then Haiku.
    SmallFast,
    /// `ANTHROPIC_MODEL`, then the built-in main model.
    Main,
}

/// `--provider`, `--model`, `--timeout`, `--deadline`, `--retries`.
#[derive(Debug, Clone, Args)]
pub struct ModelArgs {
    /// Model API: the Anthropic Messages API, an OpenAI-compatible server, or the user's own
    /// Claude Code in print mode (its login; no API key needed)
    #[arg(
        long,
        value_enum,
        env = "DREAMKIT_PROVIDER",
        default_value = "anthropic",
        value_parser = EnvNamed(clap::builder::EnumValueParser::<Provider>::new())
    )]
    pub provider: Provider,
    /// Model id [default: from ANTHROPIC_* variables, or OPENAI_MODEL with --provider openai]
    #[arg(long, value_name = "ID")]
    pub model: Option<String>,
    /// Timeout of one model request (0: none; --deadline still bounds the exchange)
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Deadline for the whole exchange, retries included
    #[arg(long, value_name = "DURATION", default_value = "3m", value_parser = parse_duration)]
    pub deadline: Duration,
    /// Retries after 429, 529, 5xx, resets and timeouts
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub retries: u32,
}

impl ModelArgs {
    /// `--timeout`, where 0 means no timeout of its own: a request may then take what is left
    /// of `--deadline` (a zero timeout would fail every request at once).
    pub fn request_timeout(&self) -> Duration {
        if self.timeout.is_zero() {
            self.deadline
        } else {
            self.timeout
        }
    }
}

#[derive(Debug, Clone)]
pub enum Credential {
    /// `x-api-key` (Anthropic) from `ANTHROPIC_API_KEY`.
    ApiKey(Secret),
    /// `Authorization: Bearer` from `ANTHROPIC_AUTH_TOKEN` or `OPENAI_API_KEY`.
    Bearer(Secret),
    /// None: a local server, or a proxy that adds it.
    None,
}

/// Everything a client needs, resolved from flags and the environment.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    pub provider: Provider,
    pub base_url: String,
    pub credential: Credential,
    pub model: String,
    pub retry: RetryPolicy,
    /// `DREAMKIT_OPENAI_EXTRA_BODY`: fields added to every chat-completions request.
    pub extra_body: serde_json::Map<String, Value>,
    /// `--provider claude`: the client that answers instead of an HTTP API.
    pub print_mode: Option<print_mode::PrintMode>,
}

impl ModelArgs {
    pub fn config(&self, env: &Env, tier: Tier) -> Result<ModelConfig, Failure> {
        let var = |name: &str| {
            env.get(name)
                .map(|v| v.to_string_lossy().trim().to_string())
        };
        let retry = RetryPolicy::from_env(self.retries, self.request_timeout(), self.deadline, env);
        match self.provider {
            Provider::Anthropic => {
                let credential = match (var("ANTHROPIC_API_KEY"), var("ANTHROPIC_AUTH_TOKEN")) {
                    (Some(key), _) if !key.is_empty() => {
                        Credential::ApiKey(Secret::checked("ANTHROPIC_API_KEY", key)?)
                    }
                    (_, Some(token)) if !token.is_empty() => {
                        Credential::Bearer(Secret::checked("ANTHROPIC_AUTH_TOKEN", token)?)
                    }
                    // Set, but empty: declared as "this server needs none".
                    _ if env.is_set("ANTHROPIC_API_KEY") || env.is_set("ANTHROPIC_AUTH_TOKEN") => {
                        Credential::None
                    }
                    _ => {
                        return Err(no_credential(
                            "the Anthropic API needs a credential: set ANTHROPIC_API_KEY (or \
ANTHROPIC_AUTH_TOKEN); for a server or proxy that needs none, set ANTHROPIC_API_KEY to the \
empty string",
                        ))
                    }
                };
                let model = self.model.clone().or_else(|| match tier {
                    Tier::Main => var("ANTHROPIC_MODEL"),
                    Tier::SmallFast => var("ANTHROPIC_SMALL_FAST_MODEL")
                        .or_else(|| var("ANTHROPIC_DEFAULT_HAIKU_MODEL")),
                });
                let default = match tier {
                    Tier::Main => DEFAULT_MAIN_MODEL,
                    Tier::SmallFast => DEFAULT_SMALL_FAST_MODEL,
                };
                Ok(ModelConfig {
                    provider: Provider::Anthropic,
                    base_url: net::base_url(
                        "ANTHROPIC_BASE_URL",
                        var("ANTHROPIC_BASE_URL").as_deref(),
                        DEFAULT_ANTHROPIC_BASE_URL,
                    )?,
                    credential,
                    model: model
                        .filter(|m| !m.is_empty())
                        .unwrap_or_else(|| default.to_string()),
                    retry,
                    extra_body: serde_json::Map::new(),
                    print_mode: None,
                })
            }
            Provider::Claude => {
                // The client resolves its own model aliases and default; the small/fast tier
                // asks for its small model.
                let model = self.model.clone().or_else(|| match tier {
                    Tier::Main => None,
                    Tier::SmallFast => Some(print_mode::SMALL_MODEL.to_string()),
                });
                let print_mode = print_mode::PrintMode::resolve(
                    env,
                    model,
                    self.retries,
                    self.request_timeout(),
                    self.deadline,
                )?;
                Ok(ModelConfig {
                    provider: Provider::Claude,
                    base_url: String::new(),
                    credential: Credential::None,
                    model: print_mode.model_name(),
                    retry,
                    extra_body: serde_json::Map::new(),
                    print_mode: Some(print_mode),
                })
            }
            Provider::Openai => {
                let model = self
                    .model
                    .clone()
                    .or_else(|| var("OPENAI_MODEL"))
                    .filter(|m| !m.is_empty())
                    .ok_or_else(|| {
                        Failure::Usage("--provider openai needs --model (or OPENAI_MODEL)".into())
                    })?;
                let credential = match var("OPENAI_API_KEY") {
                    Some(key) if !key.is_empty() => {
                        Credential::Bearer(Secret::checked("OPENAI_API_KEY", key)?)
                    }
                    // Set, but empty: a local server that needs no key.
                    _ if env.is_set("OPENAI_API_KEY") => Credential::None,
                    _ => return Err(no_credential(
                        "--provider openai needs a credential: set OPENAI_API_KEY; for a local \
server that needs none (llama.cpp, vLLM, Ollama), set OPENAI_API_KEY to the empty string",
                    )),
                };
                Ok(ModelConfig {
                    provider: Provider::Openai,
                    base_url: net::base_url(
                        "OPENAI_BASE_URL",
                        var("OPENAI_BASE_URL").as_deref(),
                        DEFAULT_OPENAI_BASE_URL,
                    )?,
                    credential,
                    model,
                    retry,
                    extra_body: extra_body(var("DREAMKIT_OPENAI_EXTRA_BODY").as_deref())?,
                    print_mode: None,
                })
            }
        }
    }
}

/// The fields the request sets itself: `DREAMKIT_OPENAI_EXTRA_BODY` may not name them.
const OWN_FIELDS: [&str; 7] = [
    "model",
    "messages",
    "tools",
    "tool_choice",
    "max_tokens",
    "response_format",
    "stream",
];

/// `DREAMKIT_OPENAI_EXTRA_BODY`: a JSON object of server-specific request fields (sampling
/// options such as llama.cpp's `repeat_penalty`, a `seed`, a default `temperature`).
fn extra_body(text: Option<&str>) -> Result<serde_json::Map<String, Value>, Failure> {
    let Some(text) = text.filter(|t| !t.is_empty()) else {
        return Ok(serde_json::Map::new());
    };
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(text) else {
        return Err(Failure::Usage(
            "DREAMKIT_OPENAI_EXTRA_BODY must be a JSON object of request fields".into(),
        ));
    };
    if let Some(own) = OWN_FIELDS.iter().find(|f| map.contains_key(**f)) {
        return Err(Failure::Usage(format!(
            "DREAMKIT_OPENAI_EXTRA_BODY cannot set {own:?}: that field is dreamkit's own"
        )));
    }
    Ok(map)
}

/// The ENVIRONMENT section of every model tool's man page.
#[cfg(feature = "docs")]
pub const MAN_ENVIRONMENT: &str = "ANTHROPIC_API_KEY (sent as x-api-key) or \
ANTHROPIC_AUTH_TOKEN (sent as Bearer): the Anthropic API's credential; set to the empty string, \
the server needs none (unset: exit 4, auth, before any request). ANTHROPIC_BASE_URL (default \
https://api.anthropic.com). ANTHROPIC_MODEL: the main model (dream-run, suggest); \
ANTHROPIC_SMALL_FAST_MODEL, then ANTHROPIC_DEFAULT_HAIKU_MODEL: the small/fast one (recap, \
turn-status); else the built-in claude-sonnet-4-5 / claude-haiku-4-5.

DREAMKIT_PROVIDER: the --provider default (anthropic, openai or claude). With openai: OPENAI_BASE_URL \
(default https://api.openai.com/v1; a local server's /v1 URL), OPENAI_API_KEY (Bearer; set it \
to the empty string for a server that needs none), OPENAI_MODEL (required unless --model), \
DREAMKIT_OPENAI_EXTRA_BODY (a JSON object of request fields added to every request, e.g. \
{\"repeat_penalty\": 1.0, \"seed\": 42}; it may not set model, messages, tools, tool_choice, \
max_tokens, response_format or stream). The response_format form each such server takes is \
remembered in $XDG_STATE_HOME/dreamkit/response-formats.json.

With claude (the user's own Claude Code, logged in as they use it; no API key): \
DREAMKIT_CLAUDE_BIN (default: claude on PATH), run in print mode in an empty private folder \
with no hook, no tool of its own, no MCP server but dream-run's relay, no auto-memory, no \
CLAUDE.md and no session saved; its version is remembered in \
$XDG_STATE_HOME/dreamkit/claude-client.json (older than 2.1.332: exit 3). CLAUDECODE and \
CLAUDE_CODE_SESSION_ID are not passed on; CLAUDE_CODE_MAX_RETRIES comes from --retries.

DREAMKIT_RETRY_BASE_MS: the retry backoff's base in ms (a testing knob). CLAUDE_CONFIG_DIR, \
HOME, XDG_STATE_HOME: where Claude Code's files and dreamkit's state are. The values of \
ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, OPENAI_API_KEY and GITHUB_TOKEN are never printed.";

/// The `auth` failure of a missing credential: exit 4 before any network I/O.
fn no_credential(message: &str) -> Failure {
    net::no_credential(message)
}

/// A system prompt part; `cache` marks the end of a stable prefix for prompt caching.
#[derive(Debug, Clone, PartialEq)]
pub struct SystemBlock {
    pub text: String,
    pub cache: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    Text {
        text: String,
        cache: bool,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        content: String,
        is_error: bool,
    },
}

impl Block {
    pub fn text(text: impl Into<String>) -> Self {
        Block::Text {
            text: text.into(),
            cache: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: Role,
    pub content: Vec<Block>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

/// One model request, provider-neutral.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub system: Vec<SystemBlock>,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    /// Marks the last tool for prompt caching (the tool list is part of the stable prefix).
    pub cache_tools: bool,
    pub max_tokens: u32,
    pub temperature: Option<f32>,
    /// The JSON the answer must be: sent as `response_format` to OpenAI-compatible servers
    /// (the Anthropic API has no such field; the prompt asks for it there).
    pub answer_schema: Option<AnswerSchema>,
}

/// A named JSON schema for a structured answer.
#[derive(Debug, Clone, PartialEq)]
pub struct AnswerSchema {
    pub name: &'static str,
    pub schema: Value,
}

/// How a chat-completions server is asked for JSON, in the order tried: the OpenAI API's
/// `json_schema` form; llama-cpp-python's `json_object` with a `schema` (it rejects the
/// first); and nothing, for a server that takes neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponseFormat {
    JsonSchema,
    JsonObjectSchema,
    Plain,
}

impl ResponseFormat {
    pub const ORDER: [ResponseFormat; 3] = [
        ResponseFormat::JsonSchema,
        ResponseFormat::JsonObjectSchema,
        ResponseFormat::Plain,
    ];
}

impl Request {
    /// One question and no tools: a system prompt and one user message (recap, suggest,
    /// turn-status).
    pub fn one_shot(system: &str, user: String, max_tokens: u32) -> Request {
        Request {
            system: vec![SystemBlock {
                text: system.to_string(),
                cache: false,
            }],
            messages: vec![Message {
                role: Role::User,
                content: vec![Block::text(user)],
            }],
            tools: Vec::new(),
            cache_tools: false,
            max_tokens,
            temperature: None,
            answer_schema: None,
        }
    }
}

/// The four usage counters, as every tool reports them, and the cost when the provider
/// states it (`--provider claude`: the client's `total_cost_usd`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub cache_read_input_tokens: u64,
    /// US dollars, as Claude Code computes them (absent when the provider does not say)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_creation_input_tokens += other.cache_creation_input_tokens;
        self.cache_read_input_tokens += other.cache_read_input_tokens;
        self.cost_usd = match (self.cost_usd, other.cost_usd) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub content: Vec<Block>,
    /// Anthropic's words: `end_turn`, `tool_use`, `max_tokens`, ...
    pub stop_reason: Option<String>,
    pub usage: Usage,
}

impl Response {
    /// The text blocks joined.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|b| match b {
                Block::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("")
    }
}

/// The error kinds of the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    Auth,
    RateLimited,
    Overloaded,
    InvalidRequest,
    Timeout,
    Network,
    MalformedResponse,
    Server,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Auth => "auth",
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::Overloaded => "overloaded",
            ErrorKind::InvalidRequest => "invalid_request",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Network => "network",
            ErrorKind::MalformedResponse => "malformed_response",
            ErrorKind::Server => "server",
        }
    }

    pub fn retryable(self) -> bool {
        matches!(
            self,
            ErrorKind::RateLimited
                | ErrorKind::Overloaded
                | ErrorKind::Timeout
                | ErrorKind::Network
                | ErrorKind::Server
        )
    }

    /// From an HTTP status that is not a success.
    pub fn from_status(status: u16) -> ErrorKind {
        match status {
            401 | 403 => ErrorKind::Auth,
            429 => ErrorKind::RateLimited,
            529 => ErrorKind::Overloaded,
            500..=599 => ErrorKind::Server,
            _ => ErrorKind::InvalidRequest,
        }
    }
}

/// A failed exchange, after any retries.
#[derive(Debug, Clone, PartialEq, Serialize, thiserror::Error)]
#[error("{kind:?}: {message}")]
pub struct ModelError {
    pub kind: ErrorKind,
    pub status: Option<u16>,
    pub message: String,
    /// Requests made, the first included.
    pub attempts: u32,
    #[serde(skip)]
    pub retry_after: Option<Duration>,
}

impl ModelError {
    /// The `error` object of a tool's result for this failed exchange: the model error kind,
    /// the message made safe for a terminal (it may quote the server), the HTTP status (or
    /// null) and the requests made.
    pub fn body(&self) -> crate::cli::ErrorBody {
        crate::cli::ErrorBody {
            kind: self.kind.as_str(),
            reason: None,
            message: crate::cli::text::sanitize(&self.message).into_owned(),
            status: Some(self.status),
            attempts: Some(self.attempts),
        }
    }

    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ModelError {
            kind,
            status: None,
            message: message.into(),
            attempts: 1,
            retry_after: None,
        }
    }
}

/// A client for one provider and model.
#[derive(Debug, Clone)]
pub struct Client {
    config: ModelConfig,
    http: net::Client,
    /// Where the structured-output form each server takes is remembered (handed in by the
    /// tool; `None`: detected anew on every call).
    formats: Option<std::path::PathBuf>,
}

impl Client {
    pub fn new(config: ModelConfig) -> Result<Client, Failure> {
        let http = net::Client::new(net::Options::new(config.retry.request_timeout))?;
        Ok(Client {
            config,
            http,
            formats: None,
        })
    }

    /// Remembers, in the file at `path`, which `response_format` form each base URL takes.
    #[must_use]
    pub fn remembering_formats(mut self, path: std::path::PathBuf) -> Client {
        self.formats = Some(path);
        self
    }

    pub fn model(&self) -> &str {
        &self.config.model
    }

    /// `--provider claude`: the client that runs the conversation itself.
    pub fn print_mode(&self) -> Option<&print_mode::PrintMode> {
        self.config.print_mode.as_ref()
    }

    /// Sends the request, retrying per the policy.
    pub async fn send(&self, request: &Request) -> Result<Response, ModelError> {
        match self.config.provider {
            // The client runs the exchange itself: no HTTP request of ours.
            Provider::Claude => match &self.config.print_mode {
                Some(print_mode) => send_print_mode(print_mode, request).await,
                None => Err(ModelError::new(
                    ErrorKind::InvalidRequest,
                    "--provider claude without a resolved client",
                )),
            },
            Provider::Anthropic => {
                let body = anthropic::body(&self.config.model, request);
                self.send_body(&body, request).await
            }
            Provider::Openai if request.answer_schema.is_some() => {
                self.send_structured(request).await
            }
            Provider::Openai => {
                let body = self.openai_body(request, ResponseFormat::Plain);
                self.send_body(&body, request).await
            }
        }
    }

    fn openai_body(&self, request: &Request, format: ResponseFormat) -> Value {
        openai::body(&self.config.model, request, format, &self.config.extra_body)
    }

    async fn send_body(&self, body: &Value, request: &Request) -> Result<Response, ModelError> {
        let body = serde_json::to_vec(body)
            .map_err(|e| ModelError::new(ErrorKind::InvalidRequest, e.to_string()))?;
        self.config
            .retry
            .run(|timeout| self.attempt(&body, &request.tools, timeout))
            .await
    }

    /// A request whose answer must be JSON, to a chat-completions server: the form this
    /// server is known to take first, then the others in [`ResponseFormat::ORDER`]. A form is
    /// passed over when the server rejects it (an error naming `response_format`, not
    /// retried) or ignores it (a reply that is not JSON, unless the form is the known one:
    /// then the model, not the server, failed). The form that gave JSON is remembered.
    async fn send_structured(&self, request: &Request) -> Result<Response, ModelError> {
        let base_url = &self.config.base_url;
        let known = self
            .formats
            .as_deref()
            .and_then(|path| formats::known(path, base_url));
        let order = known.into_iter().chain(
            ResponseFormat::ORDER
                .into_iter()
                .filter(|f| Some(*f) != known),
        );
        let mut spent = Usage::default();
        let mut last_error = None;
        // One deadline for the exchange, whichever forms it takes.
        let started = std::time::Instant::now();
        for format in order {
            let retry = RetryPolicy {
                deadline: self.config.retry.deadline.saturating_sub(started.elapsed()),
                ..self.config.retry.clone()
            };
            let body = serde_json::to_vec(&self.openai_body(request, format))
                .map_err(|e| ModelError::new(ErrorKind::InvalidRequest, e.to_string()))?;
            let answer = retry
                .run(|timeout| {
                    let body = &body;
                    async move {
                        self.attempt(body, &request.tools, timeout)
                            .await
                            .map_err(|e| rejected_format(e, format))
                    }
                })
                .await;
            match answer {
                Err(error) if format != ResponseFormat::Plain && mentions_format(&error) => {
                    last_error = Some(error);
                }
                Err(error) => return Err(error),
                Ok(mut response) => {
                    let json = openai::holds_json_object(&response.text());
                    if json || format == ResponseFormat::Plain || Some(format) == known {
                        if json && Some(format) != known {
                            if let Some(path) = self.formats.as_deref() {
                                formats::remember(path, base_url, format);
                            }
                        }
                        response.usage += spent;
                        return Ok(response);
                    }
                    spent += response.usage;
                }
            }
        }
        Err(last_error.unwrap_or_else(|| {
            ModelError::new(
                ErrorKind::MalformedResponse,
                "no response_format form answered",
            )
        }))
    }

    async fn attempt(
        &self,
        body: &[u8],
        tools: &[ToolSpec],
        timeout: Duration,
    ) -> Result<Response, ModelError> {
        let mut headers = vec![("content-type", "application/json".to_string())];
        let url = match self.config.provider {
            Provider::Anthropic => {
                headers.push(("anthropic-version", ANTHROPIC_VERSION.to_string()));
                format!("{}/v1/messages", self.config.base_url)
            }
            Provider::Openai | Provider::Claude => {
                format!("{}/chat/completions", self.config.base_url)
            }
        };
        match &self.config.credential {
            Credential::ApiKey(key) => headers.push(("x-api-key", key.expose().to_string())),
            Credential::Bearer(token) => {
                headers.push(("authorization", format!("Bearer {}", token.expose())));
            }
            Credential::None => {}
        }
        let (status, bytes) = post(&self.http, &url, &headers, body, timeout).await?;
        let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
            ModelError::new(
                ErrorKind::MalformedResponse,
                format!("answer is not JSON: {e}"),
            )
        })?;
        let parsed = match self.config.provider {
            Provider::Anthropic => anthropic::parse(&value),
            Provider::Openai | Provider::Claude => openai::parse(&value, tools),
        };
        parsed.map_err(|message| ModelError {
            status: Some(status),
            ..ModelError::new(ErrorKind::MalformedResponse, message)
        })
    }
}

/// One request answered by the user's Claude Code: the system prompt as `--system-prompt`,
/// the conversation as the prompt on stdin, a structured answer through `--json-schema`
/// (its object becomes the reply's text). The client retries by itself (`--retries`), so
/// this is one exchange. Tool use is dream-run's own (over MCP), not this path's.
async fn send_print_mode(
    print_mode: &print_mode::PrintMode,
    request: &Request,
) -> Result<Response, ModelError> {
    let system = request
        .system
        .iter()
        .map(|b| b.text.as_str())
        .collect::<Vec<_>>()
        .join("\n\n");
    let run = print_mode::Invocation {
        system_prompt: system,
        // A structured answer costs a turn of its own (the synthetic StructuredOutput tool).
        max_turns: if request.answer_schema.is_some() {
            3
        } else {
            1
        },
        json_schema: request.answer_schema.as_ref().map(|a| a.schema.clone()),
        max_output_tokens: Some(request.max_tokens),
        // One short answer: no room for long thinking.
        effort: Some("low"),
        ..print_mode::Invocation::default()
    };
    let answer = print_mode
        .one_shot(&run, &conversation_text(request))
        .await?;
    Ok(Response {
        content: vec![Block::text(answer.text)],
        stop_reason: Some("end_turn".into()),
        usage: answer.usage,
    })
}

/// The messages as one prompt: a single user message as it is; a longer exchange (a second
/// attempt after a reply that did not parse) with each turn labelled.
fn conversation_text(request: &Request) -> String {
    let text_of = |message: &Message| {
        message
            .content
            .iter()
            .filter_map(|b| match b {
                Block::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    if let [only] = request.messages.as_slice() {
        return text_of(only);
    }
    request
        .messages
        .iter()
        .map(|m| {
            let who = match m.role {
                Role::User => "User",
                Role::Assistant => "Your earlier answer",
            };
            format!("<{who}>\n{}\n</{who}>", text_of(m))
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Whether an error is a server's refusal of the `response_format` it was sent.
fn mentions_format(error: &ModelError) -> bool {
    matches!(error.status, Some(400 | 422 | 500)) && error.message.contains("response_format")
}

/// A refused `response_format` is not retried (llama-cpp-python refuses with HTTP 500, which
/// would otherwise be): the next form is tried instead.
fn rejected_format(mut error: ModelError, format: ResponseFormat) -> ModelError {
    if format != ResponseFormat::Plain && mentions_format(&error) {
        error.kind = ErrorKind::InvalidRequest;
    }
    error
}

/// One POST through [`net`] within `timeout`, as a JSON API client sees it: the 2xx body, or
/// a typed error. A non-2xx status carries the server's message and `retry-after`; a
/// redirect to another origin is `invalid_request` naming its `Location` (not followed, not
/// retried); an answer over the cap is `malformed_response` (not retried: a server that
/// sends too much once will again). `feedback send` posts this way too.
pub async fn post(
    http: &net::Client,
    url: &str,
    headers: &[(&str, String)],
    body: &[u8],
    timeout: Duration,
) -> Result<(u16, Vec<u8>), ModelError> {
    let answer = http.post(url, headers, body, timeout).await?;
    if !answer.is_success() {
        return Err(ModelError {
            kind: ErrorKind::from_status(answer.status),
            status: Some(answer.status),
            message: error_message(&answer.body, answer.status),
            attempts: 1,
            retry_after: answer.retry_after,
        });
    }
    Ok((answer.status, answer.body))
}

impl From<net::Error> for ModelError {
    fn from(e: net::Error) -> ModelError {
        let kind = match e.kind {
            net::ErrorKind::Timeout => ErrorKind::Timeout,
            net::ErrorKind::Connect | net::ErrorKind::Transport => ErrorKind::Network,
            net::ErrorKind::Redirect => ErrorKind::InvalidRequest,
            net::ErrorKind::TooLarge => ErrorKind::MalformedResponse,
        };
        ModelError {
            status: e.status,
            ..ModelError::new(kind, e.message)
        }
    }
}

/// The API's own error message (`{"error":{"message"}}` in both APIs, `{"message"}` in
/// GitHub's), or the status.
fn error_message(bytes: &[u8], status: u16) -> String {
    let from_json = serde_json::from_slice::<Value>(bytes).ok().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("message"))
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    let mut message = from_json.unwrap_or_else(|| format!("HTTP {status}"));
    if message.len() > 500 {
        let cut = (0..=500)
            .rev()
            .find(|i| message.is_char_boundary(*i))
            .unwrap_or(0);
        message.truncate(cut);
    }
    crate::cli::redact::redact(&message).into_owned()
}

/// Resolves with the signal once SIGINT or SIGTERM has been caught (inside a
/// [`crate::cli::signals::hold`], where a signal does not end the process): the one way every
/// model-backed tool stops waiting for an answer.
pub async fn until_signal() -> i32 {
    loop {
        if let Some(signal) = crate::cli::signals::received() {
            return signal;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A conversation with a tool call and its (failed) result, for the wire-format tests.
#[cfg(test)]
pub(crate) fn sample_request() -> Request {
    Request {
        system: vec![SystemBlock {
            text: "stable".into(),
            cache: true,
        }],
        messages: vec![
            Message {
                role: Role::User,
                content: vec![Block::text("hi")],
            },
            Message {
                role: Role::Assistant,
                content: vec![Block::ToolUse {
                    id: "t1".into(),
                    name: "ls".into(),
                    input: serde_json::json!({"path": "."}),
                }],
            },
            Message {
                role: Role::User,
                content: vec![Block::ToolResult {
                    tool_use_id: "t1".into(),
                    content: "a.md".into(),
                    is_error: true,
                }],
            },
        ],
        tools: vec![ToolSpec {
            name: "ls".into(),
            description: "list".into(),
            input_schema: serde_json::json!({"type": "object"}),
        }],
        cache_tools: true,
        max_tokens: 100,
        temperature: None,
        answer_schema: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> ModelArgs {
        ModelArgs {
            provider: Provider::Anthropic,
            model: None,
            timeout: Duration::from_secs(60),
            deadline: Duration::from_secs(180),
            retries: 3,
        }
    }

    #[test]
    fn model_choice_order() {
        let env = Env::from_pairs([
            ("ANTHROPIC_API_KEY", "k-1234"),
            ("ANTHROPIC_MODEL", "main-m"),
            ("ANTHROPIC_SMALL_FAST_MODEL", "small-m"),
            ("ANTHROPIC_DEFAULT_HAIKU_MODEL", "haiku-m"),
        ]);
        assert_eq!(args().config(&env, Tier::Main).unwrap().model, "main-m");
        assert_eq!(
            args().config(&env, Tier::SmallFast).unwrap().model,
            "small-m"
        );
        let env = Env::from_pairs([
            ("ANTHROPIC_API_KEY", "k-1234"),
            ("ANTHROPIC_DEFAULT_HAIKU_MODEL", "haiku-m"),
        ]);
        assert_eq!(
            args().config(&env, Tier::SmallFast).unwrap().model,
            "haiku-m"
        );
        let none = Env::from_pairs([("ANTHROPIC_API_KEY", "k-1234")]);
        assert_eq!(
            args().config(&none, Tier::SmallFast).unwrap().model,
            DEFAULT_SMALL_FAST_MODEL
        );
        assert_eq!(
            args().config(&none, Tier::Main).unwrap().model,
            DEFAULT_MAIN_MODEL
        );
        let flag = ModelArgs {
            model: Some("flag-m".into()),
            ..args()
        };
        assert_eq!(flag.config(&env, Tier::SmallFast).unwrap().model, "flag-m");
    }

    #[test]
    fn credentials_and_base_urls() {
        let env = Env::from_pairs([
            ("ANTHROPIC_API_KEY", "sk-secret"),
            ("ANTHROPIC_AUTH_TOKEN", "tok"),
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/"),
        ]);
        let c = args().config(&env, Tier::Main).unwrap();
        assert!(matches!(c.credential, Credential::ApiKey(_)));
        assert_eq!(c.base_url, "http://127.0.0.1:9");
        assert!(
            !format!("{c:?}").contains("sk-secret"),
            "key in Debug output"
        );
        let env = Env::from_pairs([("ANTHROPIC_AUTH_TOKEN", "tok")]);
        assert!(matches!(
            args().config(&env, Tier::Main).unwrap().credential,
            Credential::Bearer(_)
        ));
        for url in ["ftp://x", "http://", "not a url", "http://[::1"] {
            let bad =
                Env::from_pairs([("ANTHROPIC_API_KEY", "k-1234"), ("ANTHROPIC_BASE_URL", url)]);
            assert_eq!(
                args().config(&bad, Tier::Main).unwrap_err().kind(),
                "usage",
                "{url}"
            );
        }
    }

    #[test]
    fn no_credential_is_auth_and_an_empty_one_declares_none_needed() {
        let missing = args().config(&Env::default(), Tier::Main).unwrap_err();
        assert_eq!((missing.kind(), missing.exit().code()), ("auth", 4));
        assert!(
            missing.to_string().contains("ANTHROPIC_API_KEY"),
            "{missing}"
        );
        let declared = Env::from_pairs([("ANTHROPIC_API_KEY", "")]);
        assert!(matches!(
            args().config(&declared, Tier::Main).unwrap().credential,
            Credential::None
        ));
        for bad in ["sk-line\nbreak", "sk-tab\there", "sk-\u{7f}del"] {
            let env = Env::from_pairs([("ANTHROPIC_API_KEY", bad)]);
            let err = args().config(&env, Tier::Main).unwrap_err();
            assert_eq!(err.kind(), "auth", "{bad:?}");
            assert!(!err.to_string().contains("sk-"), "the key is shown: {err}");
        }
        let openai = ModelArgs {
            provider: Provider::Openai,
            model: Some("m".into()),
            ..args()
        };
        assert_eq!(
            openai
                .config(&Env::default(), Tier::Main)
                .unwrap_err()
                .kind(),
            "auth"
        );
    }

    #[test]
    fn openai_needs_a_model() {
        let openai = ModelArgs {
            provider: Provider::Openai,
            ..args()
        };
        assert_eq!(
            openai
                .config(&Env::default(), Tier::SmallFast)
                .unwrap_err()
                .kind(),
            "usage"
        );
        let env = Env::from_pairs([
            ("OPENAI_API_KEY", ""),
            ("OPENAI_MODEL", "llama"),
            ("OPENAI_BASE_URL", "http://localhost:8080/v1"),
        ]);
        let c = openai.config(&env, Tier::SmallFast).unwrap();
        assert_eq!(
            (c.model.as_str(), c.base_url.as_str()),
            ("llama", "http://localhost:8080/v1")
        );
        assert!(matches!(c.credential, Credential::None));
    }

    #[test]
    fn status_kinds() {
        assert_eq!(ErrorKind::from_status(401), ErrorKind::Auth);
        assert_eq!(ErrorKind::from_status(403), ErrorKind::Auth);
        assert_eq!(ErrorKind::from_status(400), ErrorKind::InvalidRequest);
        assert_eq!(ErrorKind::from_status(413), ErrorKind::InvalidRequest);
        assert_eq!(ErrorKind::from_status(429), ErrorKind::RateLimited);
        assert_eq!(ErrorKind::from_status(529), ErrorKind::Overloaded);
        assert_eq!(ErrorKind::from_status(503), ErrorKind::Server);
        assert!(!ErrorKind::Auth.retryable() && !ErrorKind::InvalidRequest.retryable());
        assert!(!ErrorKind::MalformedResponse.retryable());
        assert!(ErrorKind::Overloaded.retryable() && ErrorKind::Timeout.retryable());
    }

    #[test]
    fn error_messages_come_from_the_body() {
        let body =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(error_message(body, 529), "Overloaded");
        assert_eq!(error_message(b"<html>", 502), "HTTP 502");
    }
}
