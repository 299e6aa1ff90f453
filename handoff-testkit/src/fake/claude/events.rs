//! The stream-json events of a `claude -p` run: the `Session` and its event builders (init,
//! assistant, tool result and the result objects).

use std::process::ExitCode;

use crate::fake::json::{J, arr, obj};
use crate::fake::task::{Answer, Outcome};
use crate::fake::util;

pub(super) struct Session {
    pub(super) id: String,
    pub(super) model: String,
    pub(super) cwd: String,
    pub(super) version: String,
    pub(super) permission_mode: String,
    pub(super) tools: Vec<String>,
    pub(super) mcp_servers: Vec<String>,
    pub(super) structured: bool,
    pub(super) max_turns: u32,
}

impl Session {
    /// The stream-json events; the last one is the result object. Also the exit code.
    pub(super) fn events(&self, outcome: &Outcome) -> (Vec<J>, ExitCode) {
        let mut events = vec![self.init()];
        if let Some(w) = &outcome.wrote {
            let id = util::short_id("toolu_");
            events.push(self.assistant(vec![obj! {
                "type" => "tool_use",
                "id" => &id,
                "name" => "Write",
                "input" => obj! {
                    "file_path" => w.abs.to_string_lossy().into_owned(),
                    "content" => &w.content,
                },
            }]));
            let abs = w.abs.to_string_lossy().into_owned();
            let mut user = self.tool_result(
                &id,
                &format!(
                    "File created successfully at: {abs} (file state is current in your context — no need to Read it back)"
                ),
            );
            user.push(
                "tool_use_result",
                obj! {
                    "type" => "create",
                    "filePath" => abs,
                    "content" => &w.content,
                    "structuredPatch" => arr![],
                    "originalFile" => J::Null,
                    "userModified" => false,
                },
            );
            events.push(user);
        }
        let turns_before = if outcome.wrote.is_some() { 1 } else { 0 };
        match &outcome.answer {
            Answer::Json { value, text } => {
                if self.structured {
                    let id = util::short_id("toolu_");
                    events.push(self.assistant(vec![obj! {
                        "type" => "tool_use",
                        "id" => &id,
                        "name" => "StructuredOutput",
                        "input" => value.clone(),
                    }]));
                    events.push(self.tool_result(&id, "Structured output provided successfully"));
                    events.push(self.result_success(2, text, Some(value.clone())));
                } else {
                    events.push(self.assistant(vec![obj! { "type" => "text", "text" => text }]));
                    events.push(self.result_success(1 + turns_before, text, None));
                }
                (events, ExitCode::SUCCESS)
            }
            Answer::Prose(prose) => {
                events.push(self.assistant(vec![obj! { "type" => "text", "text" => prose }]));
                events.push(self.result_success(1 + turns_before, prose, None));
                (events, ExitCode::SUCCESS)
            }
            Answer::AgentError(message) => {
                let mut assistant = self.synthetic(message);
                assistant.push("error", "unknown");
                events.push(assistant);
                events.push(self.result_api_error(message, Some(500), None, "completed"));
                (events, ExitCode::from(1))
            }
            Answer::Api(api) => {
                let failure = api.claude(&self.model);
                let status = failure.status.map_or(J::Null, |s| J::from(u32::from(s)));
                let mut assistant = self.synthetic(&failure.text);
                assistant.push("error", failure.class);
                assistant.push("is_api_error_message", true);
                if let Some(kind) = failure.kind {
                    assistant.push("api_error_status", status);
                    assistant.push("api_error_type", kind);
                }
                events.push(assistant);
                events.push(self.result_api_error(
                    &failure.text,
                    failure.status,
                    failure.kind,
                    failure.terminal,
                ));
                (events, ExitCode::from(1))
            }
            Answer::MaxTurns => {
                let id = util::short_id("toolu_");
                events.push(self.assistant(vec![obj! {
                    "type" => "tool_use",
                    "id" => &id,
                    "name" => "Read",
                    "input" => obj! { "file_path" => format!("{}/README.md", self.cwd) },
                }]));
                events.push(self.tool_result(&id, "1\t# scratch"));
                events.push(self.result_max_turns());
                (events, ExitCode::from(1))
            }
        }
    }

    fn init(&self) -> J {
        let mut tools: Vec<J> = self.tools.iter().map(J::from).collect();
        if self.structured {
            tools.push(J::from("StructuredOutput"));
        }
        let servers: Vec<J> = self
            .mcp_servers
            .iter()
            .map(|n| obj! { "name" => n, "status" => "connected" })
            .collect();
        let api_key_source = if std::env::var_os("ANTHROPIC_API_KEY").is_some() {
            "ANTHROPIC_API_KEY"
        } else {
            "none"
        };
        obj! {
            "type" => "system",
            "subtype" => "init",
            "cwd" => &self.cwd,
            "session_id" => &self.id,
            "tools" => tools,
            "mcp_servers" => servers,
            "model" => &self.model,
            "permissionMode" => &self.permission_mode,
            "slash_commands" => arr![],
            "apiKeySource" => api_key_source,
            "claude_code_version" => &self.version,
            "output_style" => "default",
            "agents" => arr!["claude", "Explore", "general-purpose", "Plan", "statusline-setup"],
            "skills" => arr![],
            "plugins" => arr![],
            "analytics_disabled" => true,
            "product_feedback_disabled" => true,
            "uuid" => util::uuid(),
            "fast_mode_state" => "off",
        }
    }

    fn assistant(&self, content: Vec<J>) -> J {
        obj! {
            "type" => "assistant",
            "message" => obj! {
                "id" => util::short_id("msg_"),
                "type" => "message",
                "role" => "assistant",
                "model" => &self.model,
                "content" => content,
                "stop_reason" => J::Null,
                "stop_sequence" => J::Null,
                "usage" => obj! {
                    "input_tokens" => 11,
                    "output_tokens" => 1,
                    "cache_creation_input_tokens" => 0,
                    "cache_read_input_tokens" => 0,
                },
                "context_management" => J::Null,
            },
            "parent_tool_use_id" => J::Null,
            "session_id" => &self.id,
            "uuid" => util::uuid(),
        }
    }

    /// The assistant message Claude Code makes up for a failed API call (model `<synthetic>`).
    fn synthetic(&self, text: &str) -> J {
        let mut assistant = self.assistant(vec![obj! { "type" => "text", "text" => text }]);
        if let J::Obj(fields) = &mut assistant
            && let Some((_, J::Obj(msg))) = fields.iter_mut().find(|(k, _)| k == "message")
            && let Some((_, model)) = msg.iter_mut().find(|(k, _)| k == "model")
        {
            *model = J::from("<synthetic>");
        }
        assistant
    }

    fn tool_result(&self, tool_use_id: &str, content: &str) -> J {
        obj! {
            "type" => "user",
            "message" => obj! {
                "role" => "user",
                "content" => arr![obj! {
                    "tool_use_id" => tool_use_id,
                    "type" => "tool_result",
                    "content" => content,
                }],
            },
            "parent_tool_use_id" => J::Null,
            "session_id" => &self.id,
            "uuid" => util::uuid(),
            "timestamp" => util::iso_now(),
        }
    }

    fn usage(&self, zero: bool) -> (J, J) {
        let (input, output, creation, read, cost) = if zero {
            (0, 0, 0, 0, 0.0)
        } else {
            (22, 14, 3, 5, 0.000276)
        };
        let usage = obj! {
            "input_tokens" => input,
            "cache_creation_input_tokens" => creation,
            "cache_read_input_tokens" => read,
            "output_tokens" => output,
            "server_tool_use" => obj! { "web_search_requests" => 0, "web_fetch_requests" => 0 },
            "service_tier" => "standard",
            "cache_creation" => obj! {
                "ephemeral_1h_input_tokens" => 0,
                "ephemeral_5m_input_tokens" => creation,
            },
            "inference_geo" => "",
            "iterations" => arr![],
            "speed" => "standard",
        };
        let model_usage = if zero {
            obj! {}
        } else {
            J::Obj(vec![(
                self.model.clone(),
                obj! {
                    "inputTokens" => input,
                    "outputTokens" => output,
                    "cacheReadInputTokens" => read,
                    "cacheCreationInputTokens" => creation,
                    "webSearchRequests" => 0,
                    "costUSD" => cost,
                    "contextWindow" => 200_000,
                    "maxOutputTokens" => 32_000,
                },
            )])
        };
        (usage, model_usage)
    }

    fn result_success(&self, num_turns: u32, result: &str, structured: Option<J>) -> J {
        let (usage, model_usage) = self.usage(false);
        let mut r = obj! {
            "type" => "result",
            "subtype" => "success",
            "is_error" => false,
            "api_error_status" => J::Null,
            "duration_ms" => 225,
            "duration_api_ms" => 59,
            "ttft_ms" => 170,
            "ttft_stream_ms" => 161,
            "time_to_request_ms" => 147,
            "num_turns" => num_turns,
            "result" => result,
            "stop_reason" => "end_turn",
            "session_id" => &self.id,
            "total_cost_usd" => 0.000276,
            "usage" => usage,
            "modelUsage" => model_usage,
            "permission_denials" => arr![],
        };
        if let Some(s) = structured {
            r.push("structured_output", s);
        }
        r.push("terminal_reason", "completed");
        r.push("fast_mode_state", "off");
        r.push("uuid", util::uuid());
        r
    }

    /// The result of a turn a failed API call ended: `api_error_status` (null without one),
    /// `api_error_type` when given, and `terminal_reason`.
    fn result_api_error(
        &self,
        message: &str,
        status: Option<u16>,
        kind: Option<&str>,
        terminal: &str,
    ) -> J {
        let (usage, model_usage) = self.usage(true);
        let mut r = obj! {
            "type" => "result",
            "subtype" => "success",
            "is_error" => true,
            "api_error_status" => status.map_or(J::Null, |s| J::from(u32::from(s))),
        };
        if let Some(kind) = kind {
            r.push("api_error_type", kind);
        }
        let rest = obj! {
            "duration_ms" => 145,
            "duration_api_ms" => 0,
            "num_turns" => 1,
            "result" => message,
            "stop_reason" => "stop_sequence",
            "session_id" => &self.id,
            "total_cost_usd" => 0,
            "usage" => usage,
            "modelUsage" => model_usage,
            "permission_denials" => arr![],
            "terminal_reason" => terminal,
            "fast_mode_state" => "off",
            "uuid" => util::uuid(),
        };
        if let (J::Obj(fields), J::Obj(more)) = (&mut r, rest) {
            fields.extend(more);
        }
        r
    }

    fn result_max_turns(&self) -> J {
        let (usage, model_usage) = self.usage(false);
        obj! {
            "type" => "result",
            "subtype" => "error_max_turns",
            "is_error" => true,
            "api_error_status" => J::Null,
            "duration_ms" => 225,
            "duration_api_ms" => 59,
            "num_turns" => self.max_turns + 1,
            "stop_reason" => "tool_use",
            "session_id" => &self.id,
            "total_cost_usd" => 0.000276,
            "usage" => usage,
            "modelUsage" => model_usage,
            "permission_denials" => arr![],
            "terminal_reason" => "max_turns",
            "errors" => arr![format!("Reached maximum number of turns ({})", self.max_turns)],
            "fast_mode_state" => "off",
            "uuid" => util::uuid(),
        }
    }
}
