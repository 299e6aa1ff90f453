//! The request log: one [`LoggedRequest`] per request received.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Which endpoint a request reached (any path prefix before these suffixes is accepted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Endpoint {
    /// `…/messages` (Anthropic Messages; Claude adds `?beta=true`).
    Messages,
    /// `…/messages/count_tokens`, or the Gemini API's `…/models/<model>:countTokens`.
    CountTokens,
    /// `…/responses` (OpenAI Responses; Codex).
    Responses,
    /// `…/chat/completions` (OpenAI Chat Completions; OpenCode, Grok).
    ChatCompletions,
    /// `…/models/<model>:generateContent` or `…:streamGenerateContent` (the Gemini API; Gemini
    /// CLI).
    GenerateContent,
    /// `…/models`.
    Models,
    /// Anything else.
    Other,
}

impl Endpoint {
    /// Classifies a request path.
    pub fn from_path(path: &str) -> Endpoint {
        let path = path.trim_end_matches('/');
        match super::gemini::method(path) {
            Some("generateContent" | "streamGenerateContent") => return Endpoint::GenerateContent,
            Some("countTokens") => return Endpoint::CountTokens,
            _ => {}
        }
        if path.ends_with("/messages/count_tokens") {
            Endpoint::CountTokens
        } else if path.ends_with("/messages") {
            Endpoint::Messages
        } else if path.ends_with("/responses") {
            Endpoint::Responses
        } else if path.ends_with("/chat/completions") {
            Endpoint::ChatCompletions
        } else if path.ends_with("/models") {
            Endpoint::Models
        } else {
            Endpoint::Other
        }
    }

    /// Whether this endpoint asks the model for a turn.
    pub fn is_model_call(self) -> bool {
        matches!(
            self,
            Endpoint::Messages
                | Endpoint::Responses
                | Endpoint::ChatCompletions
                | Endpoint::GenerateContent
        )
    }
}

/// What the server answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reply {
    /// The side text, to a model request offering no tools.
    SideText {
        /// The text.
        text: String,
    },
    /// A final text message (a [`Step::Text`](super::Step::Text), or an
    /// [`Step::Answer`](super::Step::Answer) sent as text).
    Text {
        /// The step played.
        step: usize,
        /// The text.
        text: String,
    },
    /// A tool call.
    ToolCall {
        /// The step played.
        step: usize,
        /// The tool's name.
        tool: String,
        /// The call id sent (`toolu_…` / `call_…`).
        call_id: String,
        /// Its input: the JSON arguments, or a string for a freeform tool.
        input: Value,
    },
    /// The step needed a tool the client did not offer; the text
    /// [`NO_SUITABLE_TOOL`](super::NO_SUITABLE_TOOL) was sent.
    NoSuitableTool {
        /// The step played.
        step: usize,
        /// The tool names the step could use.
        wanted: Vec<String>,
        /// The tool names the client offered.
        offered: Vec<String>,
    },
    /// No answer (until shutdown).
    Hang {
        /// The step played.
        step: usize,
    },
    /// A scripted HTTP error.
    Status {
        /// The step played.
        step: usize,
        /// The HTTP status.
        status: u16,
    },
    /// A non-model endpoint (`HEAD`, models list, token count), an unknown path (404), a
    /// wrong method (405/426) or an unreadable model request (400).
    Http {
        /// The HTTP status.
        status: u16,
    },
}

/// One request the server received.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoggedRequest {
    /// 0-based arrival order.
    pub seq: usize,
    /// `GET`, `POST`, `HEAD`, …
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The query string, if any (`beta=true`).
    pub query: Option<String>,
    /// Headers in arrival order; names lower-case, values lossily decoded.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON; `null` when empty, a string when not JSON.
    pub body: Value,
    /// Which endpoint.
    pub endpoint: Endpoint,
    /// What was answered.
    pub reply: Reply,
    /// The needle of the [`Route`](super::Route) whose script answered; `None` for the top
    /// script and for non-model requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
}

impl LoggedRequest {
    /// The first header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether this request asked the model for a turn (a POST to a model endpoint).
    pub fn is_model_call(&self) -> bool {
        self.method == "POST" && self.endpoint.is_model_call()
    }

    /// The `model` the body names (the Gemini API: the path).
    pub fn model(&self) -> Option<&str> {
        if self.endpoint == Endpoint::GenerateContent {
            return super::gemini::model(&self.path);
        }
        self.body.get("model").and_then(Value::as_str)
    }

    /// Whether the body asked for a stream (`"stream": true`; the Gemini API:
    /// `:streamGenerateContent`).
    pub fn is_stream(&self) -> bool {
        if self.endpoint == Endpoint::GenerateContent {
            return super::gemini::is_stream(&self.path);
        }
        self.body.get("stream").and_then(Value::as_bool) == Some(true)
    }

    /// The names of the tools offered, in order (Chat `function.name`; a Responses tool
    /// without a name, such as `web_search`, by its `type`; Gemini
    /// `tools[].functionDeclarations[].name`).
    pub fn offered_tools(&self) -> Vec<String> {
        if self.endpoint == Endpoint::GenerateContent {
            return super::gemini::tool_names(&self.body);
        }
        let Some(tools) = self.body.get("tools").and_then(Value::as_array) else {
            return Vec::new();
        };
        tools
            .iter()
            .filter_map(|t| {
                t.get("name")
                    .or_else(|| t.get("function").and_then(|f| f.get("name")))
                    .or_else(|| t.get("type"))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .collect()
    }

    /// The output the client sent back for the tool call `call_id`, if this request carries
    /// it: an Anthropic `tool_result` block, a Responses `*_call_output` item, a Chat
    /// `role: "tool"` message or a Gemini `functionResponse` part (its `response.output`, else
    /// the JSON text of its `response`). A string content is returned as is; text parts are joined with
    /// newlines; anything else is its JSON text.
    pub fn tool_output(&self, call_id: &str) -> Option<String> {
        if self.endpoint == Endpoint::GenerateContent {
            return super::gemini::tool_output(&self.body, call_id);
        }
        let items = |key: &str| {
            self.body
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        };
        let is = |v: &Value, key: &str| v.get(key).and_then(Value::as_str) == Some(call_id);
        let found = match self.endpoint {
            Endpoint::Messages => items("messages")
                .filter_map(|m| m.get("content").and_then(Value::as_array))
                .flatten()
                .find(|b| {
                    b.get("type").and_then(Value::as_str) == Some("tool_result")
                        && is(b, "tool_use_id")
                })
                .and_then(|b| b.get("content")),
            Endpoint::Responses => items("input")
                .find(|i| {
                    i.get("type")
                        .and_then(Value::as_str)
                        .is_some_and(|t| t.ends_with("_call_output"))
                        && is(i, "call_id")
                })
                .and_then(|i| i.get("output")),
            Endpoint::ChatCompletions => items("messages")
                .find(|m| {
                    m.get("role").and_then(Value::as_str) == Some("tool") && is(m, "tool_call_id")
                })
                .and_then(|m| m.get("content")),
            _ => None,
        }?;
        Some(match found {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts
                .iter()
                .map(|p| match p.get("text").and_then(Value::as_str) {
                    Some(t) => t.to_owned(),
                    None => p.to_string(),
                })
                .collect::<Vec<_>>()
                .join("\n"),
            other => other.to_string(),
        })
    }

    /// The tool this request was answered with a call of, if any.
    pub fn tool_called(&self) -> Option<&str> {
        match &self.reply {
            Reply::ToolCall { tool, .. } => Some(tool),
            _ => None,
        }
    }
}
