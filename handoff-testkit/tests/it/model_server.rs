//! The scripted model server, driven over HTTP with request bodies shaped like the real CLIs'.

use std::time::{Duration, Instant};

use handoff_testkit::model_server::{
    Endpoint, LoggedRequest, ModelServer, NESTED_YIELD_MS, NO_NESTED_COMMAND, NO_SUITABLE_TOOL,
    Reply, STRUCTURED_OUTPUT_TOOL, Script, Step, ToolChoice, provider_output,
};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// HTTP and SSE helpers

struct Reply200 {
    status: u16,
    content_type: String,
    text: String,
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

async fn post(url: &str, body: &Value) -> Reply200 {
    let resp = client()
        .post(url)
        .header("x-api-key", "sk-ant-fake")
        .header("authorization", "Bearer sk-fake")
        .json(body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let text = resp.text().await.unwrap();
    Reply200 {
        status,
        content_type,
        text,
    }
}

impl Reply200 {
    fn json(&self) -> Value {
        assert_eq!(self.status, 200, "{}", self.text);
        assert_eq!(self.content_type, "application/json");
        serde_json::from_str(&self.text).unwrap()
    }

    /// Parses a well-formed SSE body: blank-line separated events, each made of `event:` and
    /// `data:` lines only, every `data` one JSON value (or `[DONE]`).
    fn sse(&self) -> Vec<(Option<String>, Value)> {
        assert_eq!(self.status, 200, "{}", self.text);
        assert_eq!(self.content_type, "text/event-stream");
        assert!(self.text.ends_with("\n\n"), "unterminated: {:?}", self.text);
        let mut events = Vec::new();
        for block in self.text.trim_end_matches('\n').split("\n\n") {
            let mut name = None;
            let mut data = Vec::new();
            for line in block.split('\n') {
                if let Some(v) = line.strip_prefix("event: ") {
                    assert!(name.is_none(), "two event lines in {block:?}");
                    name = Some(v.to_owned());
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data.push(v);
                } else {
                    panic!("bad SSE line {line:?} in {:?}", self.text);
                }
            }
            assert_eq!(data.len(), 1, "one data line per event: {block:?}");
            let value = if data[0] == "[DONE]" {
                Value::String("[DONE]".into())
            } else {
                serde_json::from_str(data[0]).unwrap()
            };
            if let Some(name) = &name {
                assert_eq!(value["type"], json!(name), "event name matches data.type");
            }
            events.push((name, value));
        }
        events
    }

    /// The event names of a named-event SSE body.
    fn event_names(&self) -> Vec<String> {
        self.sse().into_iter().map(|(n, _)| n.unwrap()).collect()
    }
}

fn event<'a>(events: &'a [(Option<String>, Value)], name: &str) -> &'a Value {
    &events
        .iter()
        .find(|(n, _)| n.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("no {name} event"))
        .1
}

fn answer() -> Value {
    provider_output("wrote hello.txt")
}

fn write_script() -> Script {
    Script::write_then_answer("/repo/hello.txt", "hello from the model\n", answer())
}

// ---------------------------------------------------------------------------------------------
// Request bodies shaped like the real CLIs' (real-clis.md)

fn schema(props: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": props, "required": required})
}

fn claude_tools(extra: &[&str]) -> Value {
    let mut tools = vec![
        json!({"name": "Bash", "description": "Run a command",
               "input_schema": schema(json!({"command": {"type": "string"}}), &["command"])}),
        json!({"name": "Edit", "description": "Edit a file", "input_schema": schema(json!({}), &[])}),
        json!({"name": "Read", "description": "Read a file", "input_schema": schema(json!({}), &[])}),
        json!({"name": "Write", "description": "Write a file",
               "input_schema": schema(json!({"file_path": {"type": "string"}, "content": {"type": "string"}}),
                                      &["file_path", "content"])}),
    ];
    for name in extra {
        tools
            .push(json!({"name": name, "description": "", "input_schema": schema(json!({}), &[])}));
    }
    Value::Array(tools)
}

fn claude_request(tools: Value, stream: bool) -> Value {
    let mut body = json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 32000,
        "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.197"},
            {"type": "text", "text": "You are Claude Code."}
        ],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "create hello.txt"}]}],
        "tools": tools,
        "metadata": {"user_id": "user_fake"},
        "thinking": {"type": "adaptive"},
        "context_management": {"edits": []},
    });
    if stream {
        body["stream"] = json!(true);
    }
    body
}

/// Appends the assistant's tool call, a mid-conversation system message and the tool result.
fn claude_after_tool(mut body: Value, id: &str, name: &str, input: Value) -> Value {
    let messages = body["messages"].as_array_mut().unwrap();
    messages.push(json!({"role": "assistant", "content": [
        {"type": "tool_use", "id": id, "name": name, "input": input}
    ]}));
    messages.push(json!({"role": "system", "content": "mid-conversation reminder"}));
    messages.push(json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": id, "content": "File created successfully at: /repo/hello.txt"}
    ]}));
    body
}

fn codex_tools(known_model: bool) -> Value {
    let mut tools = vec![
        json!({"type": "function", "name": "exec_command", "description": "Runs a command",
               "strict": false, "parameters": schema(json!({"cmd": {"type": "string"}}), &["cmd"])}),
        json!({"type": "function", "name": "write_stdin", "parameters": schema(json!({}), &[])}),
        json!({"type": "web_search"}),
    ];
    if known_model {
        tools.push(json!({"type": "custom", "name": "apply_patch", "description": "Use apply_patch",
                          "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch"}}));
    }
    Value::Array(tools)
}

fn codex_request(tools: Value, stream: bool) -> Value {
    json!({
        "model": "gpt-5.5",
        "instructions": "",
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "create hello.txt"}]}
        ],
        "tools": tools,
        "tool_choice": "auto",
        "parallel_tool_calls": true,
        "reasoning": {"effort": "medium"},
        "store": false,
        "stream": stream,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "01a22e34-485c-79f0-a3ee-42246799c335",
    })
}

fn codex_after_tool(mut body: Value, item: &Value) -> Value {
    let output_type = match item["type"].as_str().unwrap() {
        "custom_tool_call" => "custom_tool_call_output",
        _ => "function_call_output",
    };
    let input = body["input"].as_array_mut().unwrap();
    input.push(item.clone());
    input.push(json!({"type": output_type, "call_id": item["call_id"], "output": "Success."}));
    body
}

fn chat_tools(names: &[&str]) -> Value {
    names
        .iter()
        .map(|name| {
            json!({"type": "function", "function": {
                "name": name, "description": "", "parameters": schema(json!({}), &[])
            }})
        })
        .collect()
}

fn opencode_request(tools: Option<Value>) -> Value {
    let mut body = json!({
        "model": "fake-model",
        "max_tokens": 32000,
        "messages": [
            {"role": "system", "content": "You are opencode."},
            {"role": "user", "content": "create hello.txt"}
        ],
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    if let Some(tools) = tools {
        body["tools"] = tools;
        body["tool_choice"] = json!("auto");
    }
    body
}

fn grok_request(tools: Value) -> Value {
    json!({
        "model": "grok-code-fast-1",
        "messages": [{"role": "user", "content": "create hello.txt"}],
        "tools": tools,
        "tool_choice": "auto",
        "temperature": 0.7,
        "max_tokens": 1536,
        "search_parameters": {"mode": "off"},
    })
}

fn chat_after_tool(mut body: Value, tool_call: &Value) -> Value {
    let messages = body["messages"].as_array_mut().unwrap();
    let mut call = tool_call.clone();
    call.as_object_mut().unwrap().remove("index");
    messages.push(json!({"role": "assistant", "content": null, "tool_calls": [call]}));
    messages.push(json!({"role": "tool", "tool_call_id": tool_call["id"], "content": "Wrote file successfully."}));
    body
}

fn args(call: &Value) -> Value {
    serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap()
}

// ---------------------------------------------------------------------------------------------
// Anthropic Messages (Claude Code)

#[tokio::test]
async fn claude_streaming_write_then_answer() {
    let server = ModelServer::start(write_script()).await;
    let url = format!("{}/v1/messages?beta=true", server.url());

    let first = post(&url, &claude_request(claude_tools(&[]), true)).await;
    assert_eq!(
        first.event_names(),
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    let events = first.sse();
    let start = event(&events, "message_start");
    assert_eq!(start["message"]["model"], "claude-sonnet-4-5");
    assert_eq!(start["message"]["usage"]["cache_read_input_tokens"], 0);
    let block = &event(&events, "content_block_start")["content_block"];
    assert_eq!(block["type"], "tool_use");
    assert_eq!(block["name"], "Write");
    assert_eq!(block["input"], json!({}));
    let id = block["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("toolu_"), "{id}");
    let delta = &event(&events, "content_block_delta")["delta"];
    assert_eq!(delta["type"], "input_json_delta");
    let input: Value = serde_json::from_str(delta["partial_json"].as_str().unwrap()).unwrap();
    assert_eq!(
        input,
        json!({"file_path": "/repo/hello.txt", "content": "hello from the model\n"})
    );
    let message_delta = event(&events, "message_delta");
    assert_eq!(message_delta["delta"]["stop_reason"], "tool_use");
    assert!(message_delta["usage"]["output_tokens"].as_u64().unwrap() > 0);

    let second_body =
        claude_after_tool(claude_request(claude_tools(&[]), true), &id, "Write", input);
    let second = post(&url, &second_body).await;
    let events = second.sse();
    assert_eq!(
        event(&events, "content_block_start")["content_block"],
        json!({"type": "text", "text": ""})
    );
    let delta = &event(&events, "content_block_delta")["delta"];
    assert_eq!(delta["type"], "text_delta");
    let text: Value = serde_json::from_str(delta["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, answer());
    assert_eq!(
        event(&events, "message_delta")["delta"]["stop_reason"],
        "end_turn"
    );

    let log = server.requests();
    assert_eq!(log.len(), 2);
    assert_eq!(log[0].query.as_deref(), Some("beta=true"));
    assert_eq!(log[0].endpoint, Endpoint::Messages);
    assert!(matches!(&log[0].reply, Reply::ToolCall { step: 0, tool, .. } if tool == "Write"));
    assert!(matches!(log[1].reply, Reply::Text { step: 1, .. }));
    assert_eq!(server.tool_calls(), ["Write"]);
}

#[tokio::test]
async fn claude_non_streaming_fallback_is_a_plain_message() {
    let server = ModelServer::start(write_script()).await;
    let url = format!("{}/v1/messages", server.url());
    let message = post(&url, &claude_request(claude_tools(&[]), false))
        .await
        .json();
    assert_eq!(message["type"], "message");
    assert_eq!(message["role"], "assistant");
    assert_eq!(message["stop_reason"], "tool_use");
    assert_eq!(message["content"][0]["type"], "tool_use");
    assert_eq!(message["content"][0]["name"], "Write");
    assert_eq!(
        message["content"][0]["input"]["file_path"],
        "/repo/hello.txt"
    );
    let usage = &message["usage"];
    assert!(usage["input_tokens"].as_u64().unwrap() > 0);
    assert!(usage["output_tokens"].as_u64().unwrap() > 0);
    assert_eq!(usage["cache_creation_input_tokens"], 0);

    let id = message["content"][0]["id"].as_str().unwrap();
    let body = claude_after_tool(
        claude_request(claude_tools(&[]), false),
        id,
        "Write",
        message["content"][0]["input"].clone(),
    );
    let message = post(&url, &body).await.json();
    assert_eq!(message["stop_reason"], "end_turn");
    assert_eq!(message["content"][0]["type"], "text");
    assert_eq!(
        serde_json::from_str::<Value>(message["content"][0]["text"].as_str().unwrap()).unwrap(),
        answer()
    );
}

#[tokio::test]
async fn claude_answer_calls_structured_output_when_offered() {
    let server = ModelServer::start(Script::answer(answer())).await;
    let url = format!("{}/v1/messages?beta=true", server.url());
    let body = claude_request(claude_tools(&[STRUCTURED_OUTPUT_TOOL]), true);
    let events = post(&url, &body).await.sse();
    let block = &event(&events, "content_block_start")["content_block"];
    assert_eq!(block["name"], STRUCTURED_OUTPUT_TOOL);
    let delta = &event(&events, "content_block_delta")["delta"];
    let input: Value = serde_json::from_str(delta["partial_json"].as_str().unwrap()).unwrap();
    assert_eq!(input, answer());

    // After the StructuredOutput call the same (last) step ends the turn with text.
    let body = claude_after_tool(
        body,
        block["id"].as_str().unwrap(),
        STRUCTURED_OUTPUT_TOOL,
        input,
    );
    let events = post(&url, &body).await.sse();
    assert_eq!(
        event(&events, "message_delta")["delta"]["stop_reason"],
        "end_turn"
    );
    assert_eq!(
        event(&events, "content_block_start")["content_block"]["type"],
        "text"
    );
}

#[tokio::test]
async fn claude_probe_count_tokens_models_and_prefixes() {
    let server = ModelServer::start(Script::text("hello")).await;
    let http = client();
    let head = http.head(server.url()).send().await.unwrap();
    assert_eq!(head.status().as_u16(), 200);

    let count = post(
        &format!("{}/v1/messages/count_tokens?beta=true", server.url()),
        &json!({"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await
    .json();
    assert!(count["input_tokens"].as_u64().unwrap() > 0);

    let models: Value = http
        .get(format!("{}/v1/models", server.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"fake-model"), "{ids:?}");
    assert_eq!(models["object"], "list");

    // Any prefix before /v1/.
    let message = post(
        &format!("{}/anthropic/v1/messages", server.url()),
        &claude_request(claude_tools(&[]), false),
    )
    .await
    .json();
    assert_eq!(message["content"][0]["text"], "hello");

    let missing = http
        .post(format!("{}/v1/embeddings", server.url()))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status().as_u16(), 404);

    let methods: Vec<(String, Endpoint)> = server
        .requests()
        .iter()
        .map(|r| (r.method.clone(), r.endpoint))
        .collect();
    assert_eq!(
        methods,
        [
            ("HEAD".into(), Endpoint::Other),
            ("POST".into(), Endpoint::CountTokens),
            ("GET".into(), Endpoint::Models),
            ("POST".into(), Endpoint::Messages),
            ("POST".into(), Endpoint::Other),
        ]
    );
    assert_eq!(server.model_calls().len(), 1);
    assert_eq!(server.requests()[4].reply, Reply::Http { status: 404 });
}

// ---------------------------------------------------------------------------------------------
// OpenAI Responses (Codex)

#[tokio::test]
async fn codex_apply_patch_is_a_freeform_custom_tool_call() {
    let server = ModelServer::start(write_script()).await;
    let url = format!("{}/responses", server.v1_url());
    let body = codex_request(codex_tools(true), true);
    let first = post(&url, &body).await;
    assert_eq!(
        first.event_names(),
        [
            "response.created",
            "response.output_item.done",
            "response.completed"
        ]
    );
    let events = first.sse();
    let item = event(&events, "response.output_item.done")["item"].clone();
    assert_eq!(item["type"], "custom_tool_call");
    assert_eq!(item["name"], "apply_patch");
    assert_eq!(
        item["input"],
        "*** Begin Patch\n*** Add File: /repo/hello.txt\n+hello from the model\n*** End Patch"
    );
    assert!(item["call_id"].as_str().unwrap().starts_with("call_"));
    let completed = &event(&events, "response.completed")["response"];
    assert_eq!(completed["status"], "completed");
    assert_eq!(completed["output"][0], item);
    let usage = &completed["usage"];
    assert_eq!(
        usage["total_tokens"].as_u64().unwrap(),
        usage["input_tokens"].as_u64().unwrap() + usage["output_tokens"].as_u64().unwrap()
    );

    let second = post(&url, &codex_after_tool(body, &item)).await;
    let events = second.sse();
    let item = &event(&events, "response.output_item.done")["item"];
    assert_eq!(item["type"], "message");
    assert_eq!(item["role"], "assistant");
    assert_eq!(item["content"][0]["type"], "output_text");
    let text: Value = serde_json::from_str(item["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, answer());

    let log = server.model_calls();
    assert_eq!(
        log[0].offered_tools(),
        ["exec_command", "write_stdin", "web_search", "apply_patch"]
    );
    assert_eq!(server.models_requested(), ["gpt-5.5"]);
}

#[tokio::test]
async fn codex_unknown_model_writes_through_exec_command() {
    let server = ModelServer::start(write_script()).await;
    let url = format!("{}/v1/responses", server.url());
    let body = codex_request(codex_tools(false), true);
    let events = post(&url, &body).await.sse();
    let item = event(&events, "response.output_item.done")["item"].clone();
    assert_eq!(item["type"], "function_call");
    assert_eq!(item["name"], "exec_command");
    let arguments: Value = serde_json::from_str(item["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(
        arguments,
        json!({"cmd": "printf %s 'hello from the model\n' > /repo/hello.txt"})
    );

    let events = post(&url, &codex_after_tool(body, &item)).await.sse();
    assert_eq!(
        event(&events, "response.output_item.done")["item"]["type"],
        "message"
    );
}

#[tokio::test]
async fn codex_non_streaming_and_websocket_rejection() {
    let server = ModelServer::start(write_script()).await;
    let url = format!("{}/v1/responses", server.url());
    let response = post(&url, &codex_request(codex_tools(true), false))
        .await
        .json();
    assert_eq!(response["object"], "response");
    assert_eq!(response["status"], "completed");
    assert_eq!(response["output"][0]["type"], "custom_tool_call");
    assert!(response["usage"]["input_tokens"].as_u64().unwrap() > 0);

    let started = Instant::now();
    let upgrade = client()
        .get(&url)
        .header("connection", "Upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        .send()
        .await
        .unwrap();
    assert_eq!(upgrade.status().as_u16(), 426);
    assert!(started.elapsed() < Duration::from_secs(2));
    let get = client().get(&url).send().await.unwrap();
    assert_eq!(get.status().as_u16(), 405);
}

// ---------------------------------------------------------------------------------------------
// Chat Completions (OpenCode streaming, Grok non-streaming)

#[tokio::test]
async fn opencode_title_request_then_streaming_tool_call_then_answer() {
    let server = ModelServer::start(write_script()).await;
    let url = format!("{}/chat/completions", server.v1_url());

    // Title generation: no tools.
    let title = post(&url, &opencode_request(None)).await;
    let chunks: Vec<Value> = title
        .sse()
        .into_iter()
        .map(|(n, v)| {
            assert!(n.is_none(), "chat chunks are unnamed");
            v
        })
        .collect();
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, handoff_testkit::model_server::DEFAULT_SIDE_TEXT);

    let tools = chat_tools(&[
        "bash",
        "edit",
        "glob",
        "grep",
        "read",
        "skill",
        "task",
        "todowrite",
        "webfetch",
        "write",
    ]);
    let body = opencode_request(Some(tools));
    let chunks: Vec<Value> = post(&url, &body)
        .await
        .sse()
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    assert_eq!(chunks.last().unwrap(), "[DONE]");
    assert_eq!(chunks[0]["object"], "chat.completion.chunk");
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let call = chunks
        .iter()
        .find_map(|c| c["choices"][0]["delta"]["tool_calls"].get(0))
        .unwrap()
        .clone();
    assert_eq!(call["index"], 0);
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "write");
    assert_eq!(
        args(&call),
        json!({"filePath": "/repo/hello.txt", "content": "hello from the model\n"})
    );
    let finish: Vec<&str> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["finish_reason"].as_str())
        .collect();
    assert_eq!(finish, ["tool_calls"]);
    let usage = &chunks[chunks.len() - 2];
    assert_eq!(usage["choices"], json!([]));
    assert!(usage["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    assert!(usage["usage"]["completion_tokens"].as_u64().unwrap() > 0);

    let chunks: Vec<Value> = post(&url, &chat_after_tool(body, &call))
        .await
        .sse()
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), answer());
    let finish: Vec<&str> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["finish_reason"].as_str())
        .collect();
    assert_eq!(finish, ["stop"]);

    let replies: Vec<Reply> = server.requests().into_iter().map(|r| r.reply).collect();
    assert!(matches!(replies[0], Reply::SideText { .. }));
    assert!(matches!(&replies[1], Reply::ToolCall { tool, .. } if tool == "write"));
    assert!(matches!(replies[2], Reply::Text { step: 1, .. }));
}

#[tokio::test]
async fn chat_without_include_usage_has_no_usage_chunk() {
    let server = ModelServer::start(Script::text("hi")).await;
    let mut body = opencode_request(Some(chat_tools(&["write"])));
    body.as_object_mut().unwrap().remove("stream_options");
    let chunks: Vec<Value> = post(&format!("{}/chat/completions", server.v1_url()), &body)
        .await
        .sse()
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    assert!(chunks.iter().all(|c| c.get("usage").is_none()));
    assert_eq!(chunks.last().unwrap(), "[DONE]");
}

#[tokio::test]
async fn grok_non_streaming_chat_uses_create_file() {
    let server = ModelServer::start(write_script()).await;
    let url = format!("{}/chat/completions", server.v1_url());
    let tools = chat_tools(&[
        "view_file",
        "create_file",
        "str_replace_editor",
        "bash",
        "search",
    ]);
    let body = grok_request(tools);
    let completion = post(&url, &body).await.json();
    assert_eq!(completion["object"], "chat.completion");
    let choice = &completion["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["content"], Value::Null);
    let call = choice["message"]["tool_calls"][0].clone();
    assert_eq!(call["function"]["name"], "create_file");
    assert_eq!(
        args(&call),
        json!({"path": "/repo/hello.txt", "content": "hello from the model\n"})
    );
    assert!(completion["usage"]["total_tokens"].as_u64().unwrap() > 0);

    let completion = post(&url, &chat_after_tool(body, &call)).await.json();
    let choice = &completion["choices"][0];
    assert_eq!(choice["finish_reason"], "stop");
    assert_eq!(
        serde_json::from_str::<Value>(choice["message"]["content"].as_str().unwrap()).unwrap(),
        answer()
    );
}

// ---------------------------------------------------------------------------------------------
// The Gemini API (Gemini CLI: `…:streamGenerateContent?alt=sse`, recorded from 0.61.0)

/// The tools Gemini CLI 0.61.0 offers with `--approval-mode yolo`.
const GEMINI_TOOLS: [&str; 16] = [
    "update_topic",
    "list_directory",
    "read_file",
    "grep_search",
    "glob",
    "replace",
    "write_file",
    "web_fetch",
    "run_shell_command",
    "list_background_processes",
    "read_background_output",
    "google_web_search",
    "write_todos",
    "enter_plan_mode",
    "invoke_agent",
    "activate_skill",
];

fn gemini_request(tools: &[&str]) -> Value {
    let declarations: Vec<Value> = tools
        .iter()
        .map(|n| json!({"name": n, "description": n, "parametersJsonSchema": schema(json!({}), &[])}))
        .collect();
    json!({
        "contents": [{"role": "user", "parts": [
            {"text": "<session_context>\nThis is the Gemini CLI.\n</session_context>"},
            {"text": "write hello.txt"},
        ]}],
        "systemInstruction": {"parts": [{"text": "You are a non-interactive CLI agent."}]},
        "tools": [{"functionDeclarations": declarations}],
        "generationConfig": {"temperature": 1, "topP": 0.95, "topK": 64,
            "thinkingConfig": {"includeThoughts": true, "thinkingBudget": 8192}},
    })
}

/// `body` with the model's `functionCall` part and the client's `functionResponse` appended,
/// as Gemini CLI sends the next turn.
fn gemini_after_tool(mut body: Value, call: &Value, output: &str) -> Value {
    let contents = body["contents"].as_array_mut().unwrap();
    contents.push(json!({"role": "model", "parts": [
        {"functionCall": call, "thoughtSignature": "skip_thought_signature_validator"},
    ]}));
    contents.push(json!({"role": "user", "parts": [{"functionResponse": {
        "id": call["id"], "name": call["name"], "response": {"output": output},
    }}]}));
    body
}

fn gemini_url(server: &ModelServer, model: &str, stream: bool) -> String {
    if stream {
        format!(
            "{}/v1beta/models/{model}:streamGenerateContent?alt=sse",
            server.url()
        )
    } else {
        format!("{}/v1beta/models/{model}:generateContent", server.url())
    }
}

/// The parts of every chunk of a Gemini SSE stream, and its last chunk.
fn gemini_chunks(reply: &Reply200) -> (Vec<Value>, Value) {
    let chunks: Vec<Value> = reply
        .sse()
        .into_iter()
        .map(|(n, v)| {
            assert!(n.is_none(), "Gemini chunks are unnamed");
            v
        })
        .collect();
    let parts = chunks
        .iter()
        .flat_map(|c| {
            c["candidates"][0]["content"]["parts"]
                .as_array()
                .unwrap()
                .clone()
        })
        .collect();
    (parts, chunks.last().unwrap().clone())
}

#[tokio::test]
async fn gemini_streaming_write_then_answer() {
    let server = ModelServer::start(write_script()).await;
    let url = gemini_url(&server, "gemini-2.5-flash", true);
    let body = gemini_request(&GEMINI_TOOLS);
    let reply = post(&url, &body).await;
    let (parts, last) = gemini_chunks(&reply);
    assert_eq!(parts.len(), 1);
    let call = parts[0]["functionCall"].clone();
    assert_eq!(call["name"], "write_file");
    assert_eq!(
        call["args"],
        json!({"file_path": "/repo/hello.txt", "content": "hello from the model\n"})
    );
    assert!(call["id"].as_str().unwrap().starts_with("call_"));
    assert_eq!(last["candidates"][0]["finishReason"], "STOP");
    assert_eq!(last["candidates"][0]["content"]["role"], "model");
    assert_eq!(last["modelVersion"], "gemini-2.5-flash");
    let usage = &last["usageMetadata"];
    let (prompt, candidates) = (
        usage["promptTokenCount"].as_u64().unwrap(),
        usage["candidatesTokenCount"].as_u64().unwrap(),
    );
    assert!(prompt > 0 && candidates > 0);
    assert_eq!(usage["totalTokenCount"].as_u64(), Some(prompt + candidates));

    let after = gemini_after_tool(body, &call, "Successfully created and wrote to new file");
    let reply = post(&url, &after).await;
    let (parts, last) = gemini_chunks(&reply);
    // A text comes in two chunks; only the last finishes and carries the usage.
    assert_eq!(parts.len(), 2);
    let text: String = parts.iter().map(|p| p["text"].as_str().unwrap()).collect();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), answer());
    let chunks = reply.sse();
    assert!(chunks[0].1["candidates"][0].get("finishReason").is_none());
    assert!(chunks[0].1.get("usageMetadata").is_none());
    assert_eq!(last["candidates"][0]["finishReason"], "STOP");

    let log = server.model_calls();
    assert_eq!(log.len(), 2);
    assert_eq!(log[0].endpoint, Endpoint::GenerateContent);
    assert_eq!(log[0].model(), Some("gemini-2.5-flash"));
    assert!(log[0].is_stream());
    assert_eq!(log[0].query.as_deref(), Some("alt=sse"));
    assert_eq!(log[0].offered_tools(), GEMINI_TOOLS);
    assert_eq!(server.models_requested(), ["gemini-2.5-flash"]);
    assert_eq!(server.tool_calls(), ["write_file"]);
    let id = call["id"].as_str().unwrap();
    assert_eq!(
        server.tool_output(id).as_deref(),
        Some("Successfully created and wrote to new file")
    );
    assert!(matches!(log[1].reply, Reply::Text { step: 1, .. }));
}

#[tokio::test]
async fn gemini_non_streaming_side_text_and_count_tokens() {
    let server = ModelServer::start(Script::text("done")).await;
    // A request without tools (Gemini CLI's utility calls) gets the side text.
    let mut body = gemini_request(&[]);
    body.as_object_mut().unwrap().remove("tools");
    let reply = post(&gemini_url(&server, "gemini-2.5-flash-lite", false), &body)
        .await
        .json();
    let candidate = &reply["candidates"][0];
    assert_eq!(
        candidate["content"]["parts"],
        json!([{"text": handoff_testkit::model_server::DEFAULT_SIDE_TEXT}])
    );
    assert_eq!(candidate["finishReason"], "STOP");
    assert_eq!(reply["modelVersion"], "gemini-2.5-flash-lite");
    assert!(reply["usageMetadata"]["totalTokenCount"].as_u64().unwrap() > 0);

    let reply = post(
        &gemini_url(&server, "gemini-2.5-flash", false),
        &gemini_request(&["read_file"]),
    )
    .await
    .json();
    assert_eq!(
        reply["candidates"][0]["content"]["parts"],
        json!([{"text": "done"}])
    );

    let count = post(
        &format!(
            "{}/v1beta/models/gemini-2.5-flash:countTokens",
            server.url()
        ),
        &body,
    )
    .await
    .json();
    assert!(count["totalTokens"].as_u64().unwrap() > 0);
    let endpoints: Vec<Endpoint> = server.requests().iter().map(|r| r.endpoint).collect();
    assert_eq!(
        endpoints,
        [
            Endpoint::GenerateContent,
            Endpoint::GenerateContent,
            Endpoint::CountTokens
        ]
    );
    assert!(!server.requests()[0].is_stream());
    assert_eq!(
        server.models_requested(),
        ["gemini-2.5-flash-lite", "gemini-2.5-flash"]
    );
}

#[tokio::test]
async fn gemini_shell_routes_and_statuses() {
    // The prompt text is the system instruction and the user's text parts: a route matches it.
    let script = Script::route(
        [(
            "Operation: advice",
            Script::new([Step::shell("echo hi"), Step::text("advised")]),
        )],
        Script::text("worker"),
    );
    let server = ModelServer::start(script).await;
    let url = gemini_url(&server, "gemini-2.5-pro", true);
    let mut body = gemini_request(&["read_file", "run_shell_command"]);
    body["systemInstruction"]["parts"][0]["text"] = json!("Operation: advice");
    let (parts, _) = gemini_chunks(&post(&url, &body).await);
    let call = parts[0]["functionCall"].clone();
    assert_eq!(call["name"], "run_shell_command");
    assert_eq!(call["args"]["command"], "echo hi");
    assert!(call["args"]["description"].is_string());
    // The function response is not prompt text; the route still holds by the system text.
    let (parts, _) = gemini_chunks(&post(&url, &gemini_after_tool(body, &call, "hi\n")).await);
    let text: String = parts.iter().map(|p| p["text"].as_str().unwrap()).collect();
    assert_eq!(text, "advised");
    let (parts, _) = gemini_chunks(&post(&url, &gemini_request(&["read_file"])).await);
    assert_eq!(parts, [json!({"text": "wor"}), json!({"text": "ker"})]);
    assert_eq!(
        server
            .model_calls()
            .iter()
            .map(|r| r.route.clone())
            .collect::<Vec<_>>(),
        [
            Some("Operation: advice".to_owned()),
            Some("Operation: advice".to_owned()),
            None
        ]
    );

    // A step that needs a tool Gemini did not offer is refused in words.
    server.set_script(write_script());
    let (parts, _) = gemini_chunks(&post(&url, &gemini_request(&["read_file", "glob"])).await);
    let text: String = parts.iter().map(|p| p["text"].as_str().unwrap()).collect();
    assert_eq!(text, NO_SUITABLE_TOOL);
    assert_eq!(server.refused_tool_calls().len(), 1);

    server.set_script(Script::new([Step::Status(503)]));
    let reply = post(&url, &gemini_request(&[])).await;
    assert_eq!(reply.status, 503);
    let body: Value = serde_json::from_str(&reply.text).unwrap();
    assert_eq!(body["error"]["code"], 503);
    assert_eq!(body["error"]["status"], "UNAVAILABLE");
    assert!(body["error"]["message"].is_string());
}

// ---------------------------------------------------------------------------------------------
// Tool choice

#[tokio::test]
async fn shell_step_picks_each_clis_shell_tool() {
    let server = ModelServer::start(Script::new([Step::shell("echo hi > out.txt")])).await;

    let message = post(
        &format!("{}/v1/messages", server.url()),
        &claude_request(claude_tools(&[]), false),
    )
    .await
    .json();
    assert_eq!(message["content"][0]["name"], "Bash");
    assert_eq!(
        message["content"][0]["input"]["command"],
        "echo hi > out.txt"
    );

    let mut body = opencode_request(Some(chat_tools(&["read", "bash", "write"])));
    body["stream"] = json!(false);
    let completion = post(&format!("{}/chat/completions", server.v1_url()), &body)
        .await
        .json();
    let call = &completion["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "bash");
    assert_eq!(args(call)["command"], "echo hi > out.txt");
    assert!(args(call)["description"].is_string());

    let response = post(
        &format!("{}/responses", server.v1_url()),
        &codex_request(codex_tools(true), false),
    )
    .await
    .json();
    let item = &response["output"][0];
    assert_eq!(item["name"], "exec_command");
    assert_eq!(
        serde_json::from_str::<Value>(item["arguments"].as_str().unwrap()).unwrap(),
        json!({"cmd": "echo hi > out.txt"})
    );

    let shell_only =
        json!([{"type": "function", "name": "shell", "parameters": schema(json!({}), &[])}]);
    let response = post(
        &format!("{}/responses", server.v1_url()),
        &codex_request(shell_only, false),
    )
    .await
    .json();
    let item = &response["output"][0];
    assert_eq!(item["name"], "shell");
    assert_eq!(
        serde_json::from_str::<Value>(item["arguments"].as_str().unwrap()).unwrap(),
        json!({"command": ["bash", "-lc", "echo hi > out.txt"]})
    );
    let (parts, _) = gemini_chunks(
        &post(
            &gemini_url(&server, "gemini-2.5-flash", true),
            &gemini_request(&GEMINI_TOOLS),
        )
        .await,
    );
    assert_eq!(
        parts[0]["functionCall"]["args"],
        json!({"command": "echo hi > out.txt", "description": "Run a shell command"})
    );
    assert_eq!(
        server.tool_calls(),
        ["Bash", "bash", "exec_command", "shell", "run_shell_command"]
    );
}

#[tokio::test]
async fn write_file_through_shell_tool_and_function_apply_patch() {
    let server = ModelServer::start(Script::new([Step::write_file("/r/a b.txt", "it's\n")])).await;
    let url = format!("{}/responses", server.v1_url());
    let shell_only =
        json!([{"type": "function", "name": "shell", "parameters": schema(json!({}), &[])}]);
    let response = post(&url, &codex_request(shell_only, false)).await.json();
    assert_eq!(
        serde_json::from_str::<Value>(response["output"][0]["arguments"].as_str().unwrap())
            .unwrap(),
        json!({"command": ["bash", "-lc", r#"printf %s "it's
" > '/r/a b.txt'"#]})
    );

    // An apply_patch offered as a JSON function gets `{input: <patch>}`.
    let function_patch =
        json!([{"type": "function", "name": "apply_patch", "parameters": schema(json!({}), &[])}]);
    let response = post(&url, &codex_request(function_patch, false))
        .await
        .json();
    let item = &response["output"][0];
    assert_eq!(item["type"], "function_call");
    assert_eq!(
        serde_json::from_str::<Value>(item["arguments"].as_str().unwrap()).unwrap(),
        json!({"input": "*** Begin Patch\n*** Add File: /r/a b.txt\n+it's\n*** End Patch"})
    );
}

#[tokio::test]
async fn tool_call_by_name_and_no_suitable_tool() {
    let script = Script::new([Step::ToolCall {
        tool: ToolChoice::first_of(["Glob", "Read"]),
        args: json!({"file_path": "/repo/README.md"}),
    }]);
    let server = ModelServer::start(script).await;
    let url = format!("{}/v1/messages", server.url());
    let message = post(&url, &claude_request(claude_tools(&[]), false))
        .await
        .json();
    assert_eq!(message["content"][0]["name"], "Read");
    assert_eq!(
        message["content"][0]["input"],
        json!({"file_path": "/repo/README.md"})
    );

    // Read-only Codex: nothing that can write a file.
    server.set_script(Script::new([Step::write_file("/repo/x", "x")]));
    let only_search = json!([{"type": "web_search"}, {"type": "function", "name": "view_image", "parameters": {}}]);
    let response = post(
        &format!("{}/v1/responses", server.url()),
        &codex_request(only_search, true),
    )
    .await;
    let events = response.sse();
    let item = &event(&events, "response.output_item.done")["item"];
    assert_eq!(item["content"][0]["text"], NO_SUITABLE_TOOL);

    let refused = server.refused_tool_calls();
    assert_eq!(refused.len(), 1);
    let Reply::NoSuitableTool {
        step,
        wanted,
        offered,
    } = &refused[0].reply
    else {
        panic!("{:?}", refused[0].reply)
    };
    assert_eq!(*step, 0);
    assert_eq!(wanted[0], "Write");
    assert_eq!(offered, &["web_search", "view_image"]);

    // FirstToolOf gives each tool its own arguments.
    server.set_script(Script::new([Step::FirstToolOf(vec![
        ("Read".into(), json!({"file_path": "/a"})),
        ("read".into(), json!({"filePath": "/a"})),
    ])]));
    let mut body = opencode_request(Some(chat_tools(&["read"])));
    body["stream"] = json!(false);
    let completion = post(&format!("{}/v1/chat/completions", server.url()), &body)
        .await
        .json();
    let call = &completion["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(args(call), json!({"filePath": "/a"}));
}

#[tokio::test]
async fn steps_follow_tool_results_and_repeat_the_last() {
    let script = Script::new([
        Step::shell("true"),
        Step::shell("false"),
        Step::text("done"),
    ]);
    let server = ModelServer::start(script).await;
    let url = format!("{}/chat/completions", server.v1_url());
    let mut body = grok_request(chat_tools(&["bash"]));
    let mut commands = Vec::new();
    for _ in 0..2 {
        let completion = post(&url, &body).await.json();
        let call = completion["choices"][0]["message"]["tool_calls"][0].clone();
        commands.push(args(&call)["command"].as_str().unwrap().to_owned());
        body = chat_after_tool(body, &call);
    }
    assert_eq!(commands, ["true", "false"]);
    // Step 2 and beyond (3 and 4 tool results) all answer "done".
    for _ in 0..2 {
        let completion = post(&url, &body).await.json();
        assert_eq!(completion["choices"][0]["message"]["content"], "done");
        body = chat_after_tool(
            body,
            &json!({"id": "call_x", "type": "function",
                                            "function": {"name": "bash", "arguments": "{}"}}),
        );
    }
    let steps: Vec<Option<usize>> = server
        .requests()
        .iter()
        .map(|r| match r.reply {
            Reply::ToolCall { step, .. } | Reply::Text { step, .. } => Some(step),
            _ => None,
        })
        .collect();
    assert_eq!(steps, [Some(0), Some(1), Some(2), Some(2)]);
}

#[tokio::test]
async fn answer_is_text_for_clis_without_structured_output() {
    let server = ModelServer::start(Script::new([Step::provider_answer("all good")])).await;
    let message = post(
        &format!("{}/v1/messages", server.url()),
        &claude_request(claude_tools(&[]), false),
    )
    .await
    .json();
    let text = message["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap(),
        provider_output("all good")
    );
    assert_eq!(
        provider_output("all good")["schemaVersion"],
        "handoff.provider-output.v1"
    );
}

// ---------------------------------------------------------------------------------------------
// Routes and nested advice

/// A worker's prompt as handoff builds it for `run-with-advice` (the nested command on its own
/// line, indented, paths quoted for `sh` where they need it).
const WORKER_PROMPT: &str = "You are a delegated coding agent started by handoff on behalf of \
     codex.\nOperation: handoff\nMode: review\n\nNested advice is available: run this shell \
     command with your question on standard input, replacing AGENT with one of codex, claude:\n    \
     \"/opt/it's/handoff\" advice --harness AGENT --cwd /w/repo --instructions -\nIt prints \
     one result JSON line.";

const ADVISER_PROMPT: &str =
    "You are a delegated coding agent started by handoff on behalf of claude.\nOperation: advice\n";

/// The command [`Step::NestedAdvice`] runs for [`WORKER_PROMPT`], target `codex`.
const NESTED_COMMAND: &str = "printf %s \"Is it's safe?\" | \"/opt/it's/handoff\" advice \
     --harness codex --cwd /w/repo --instructions -";

fn nested_script() -> Script {
    Script::route(
        [(
            "Operation: advice",
            Script::new([Step::provider_answer("advice: looks fine")]),
        )],
        Script::new([
            Step::nested_advice("codex", "Is it's safe?"),
            Step::provider_answer("got advice"),
        ]),
    )
}

fn with_user_text(mut body: Value, pointer: &str, text: &str) -> Value {
    *body.pointer_mut(pointer).unwrap() = json!(text);
    body
}

#[tokio::test]
async fn claude_nested_advice_runs_the_prompt_command_through_bash() {
    let server = ModelServer::start(nested_script()).await;
    let url = format!("{}/v1/messages?beta=true", server.url());
    let body = with_user_text(
        claude_request(claude_tools(&[STRUCTURED_OUTPUT_TOOL]), true),
        "/messages/0/content/0/text",
        WORKER_PROMPT,
    );
    let events = post(&url, &body).await.sse();
    let block = &event(&events, "content_block_start")["content_block"];
    assert_eq!(block["name"], "Bash");
    let delta = &event(&events, "content_block_delta")["delta"];
    let input: Value = serde_json::from_str(delta["partial_json"].as_str().unwrap()).unwrap();
    assert_eq!(input["command"], NESTED_COMMAND);
    let id = block["id"].as_str().unwrap();

    // The adviser's conversation (same server) is routed to the adviser's script.
    let adviser = with_user_text(
        claude_request(claude_tools(&[STRUCTURED_OUTPUT_TOOL]), true),
        "/messages/0/content/0/text",
        ADVISER_PROMPT,
    );
    let events = post(&url, &adviser).await.sse();
    let delta = &event(&events, "content_block_delta")["delta"];
    let input: Value = serde_json::from_str(delta["partial_json"].as_str().unwrap()).unwrap();
    assert_eq!(input, provider_output("advice: looks fine"));

    // The worker's next turn sees the command's output as the tool result, and answers.
    let mut next = claude_after_tool(body, id, "Bash", json!({"command": NESTED_COMMAND}));
    next["messages"][3]["content"][0]["content"] =
        json!([{"type": "text", "text": "{\"output\":{\"response\":\"advice: looks fine\"}}"}]);
    let events = post(&url, &next).await.sse();
    let delta = &event(&events, "content_block_delta")["delta"];
    let input: Value = serde_json::from_str(delta["partial_json"].as_str().unwrap()).unwrap();
    assert_eq!(input, provider_output("got advice"));

    let log = server.model_calls();
    let routes: Vec<Option<&str>> = log.iter().map(|r| r.route.as_deref()).collect();
    assert_eq!(routes, [None, Some("Operation: advice"), None]);
    assert!(matches!(&log[0].reply, Reply::ToolCall { step: 0, tool, .. } if tool == "Bash"));
    assert_eq!(
        server.tool_output(id).as_deref(),
        Some("{\"output\":{\"response\":\"advice: looks fine\"}}")
    );
    assert_eq!(server.tool_output("toolu_other"), None);
}

#[tokio::test]
async fn codex_nested_advice_waits_for_the_adviser_in_exec_command() {
    let server = ModelServer::start(nested_script()).await;
    let url = format!("{}/v1/responses", server.url());
    let body = with_user_text(
        codex_request(codex_tools(true), true),
        "/input/1/content/0/text",
        WORKER_PROMPT,
    );
    let events = post(&url, &body).await.sse();
    let item = event(&events, "response.output_item.done")["item"].clone();
    assert_eq!(item["type"], "function_call");
    assert_eq!(item["name"], "exec_command");
    let arguments: Value = serde_json::from_str(item["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(
        arguments,
        json!({"cmd": NESTED_COMMAND, "yield_time_ms": NESTED_YIELD_MS})
    );

    // The prompt may also arrive in `instructions` or as a plain-string input.
    let mut in_instructions = codex_request(codex_tools(false), false);
    in_instructions["instructions"] = json!(WORKER_PROMPT);
    let response = post(&url, &in_instructions).await.json();
    assert_eq!(response["output"][0]["name"], "exec_command");
    let mut plain = codex_request(codex_tools(false), false);
    plain["input"] = json!(ADVISER_PROMPT);
    let response = post(&url, &plain).await.json();
    let text = response["output"][0]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap(),
        provider_output("advice: looks fine")
    );

    let next = codex_after_tool(body, &item);
    let events = post(&url, &next).await.sse();
    let text = event(&events, "response.output_item.done")["item"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        provider_output("got advice")
    );
    assert_eq!(
        server
            .tool_output(item["call_id"].as_str().unwrap())
            .as_deref(),
        Some("Success.")
    );
}

#[tokio::test]
async fn opencode_nested_advice_uses_bash_and_a_missing_command_is_said() {
    let server = ModelServer::start(nested_script()).await;
    let url = format!("{}/v1/chat/completions", server.url());
    let mut body = opencode_request(Some(chat_tools(&["bash", "read"])));
    body["messages"][1]["content"] = json!([{"type": "text", "text": WORKER_PROMPT}]);
    body["stream"] = json!(false);
    let completion = post(&url, &body).await.json();
    let call = completion["choices"][0]["message"]["tool_calls"][0].clone();
    assert_eq!(call["function"]["name"], "bash");
    assert_eq!(args(&call)["command"], NESTED_COMMAND);
    let next = chat_after_tool(body, &call);
    assert_eq!(
        server.tool_output(call["id"].as_str().unwrap()),
        None,
        "not sent yet"
    );
    let completion = post(&url, &next).await.json();
    assert_eq!(
        serde_json::from_str::<Value>(
            completion["choices"][0]["message"]["content"]
                .as_str()
                .unwrap()
        )
        .unwrap(),
        provider_output("got advice")
    );
    assert_eq!(
        server.tool_output(call["id"].as_str().unwrap()).as_deref(),
        Some("Wrote file successfully.")
    );

    // A prompt without the command: the step says so instead of calling a tool.
    let completion = post(&url, &opencode_request(Some(chat_tools(&["bash"]))))
        .await
        .sse();
    let content: String = completion
        .iter()
        .filter_map(|(_, v)| {
            v.pointer("/choices/0/delta/content")
                .and_then(Value::as_str)
        })
        .collect();
    assert_eq!(content, NO_NESTED_COMMAND);
    // Tool results never route: a tool output mentioning the adviser's operation stays on
    // the worker's script.
    let mut tricky = opencode_request(Some(chat_tools(&["bash"])));
    tricky["messages"][1]["content"] = json!(WORKER_PROMPT);
    tricky["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({"role": "tool", "tool_call_id": "call_x", "content": "Operation: advice"}));
    tricky["stream"] = json!(false);
    let completion = post(&url, &tricky).await.json();
    assert_eq!(
        serde_json::from_str::<Value>(
            completion["choices"][0]["message"]["content"]
                .as_str()
                .unwrap()
        )
        .unwrap(),
        provider_output("got advice")
    );
    let routes: Vec<Option<String>> = server.model_calls().into_iter().map(|r| r.route).collect();
    assert_eq!(routes, [None, None, None, None]);
}

#[test]
fn routed_script_round_trips_through_json() {
    let script = nested_script();
    let text = serde_json::to_string(&script).unwrap();
    assert!(text.contains("\"routes\""), "{text}");
    assert!(text.contains("\"nested_advice\""), "{text}");
    let back: Script = serde_json::from_str(&text).unwrap();
    assert_eq!(back, script);
    // A script without routes serializes as before.
    assert!(
        !serde_json::to_string(&Script::text("hi"))
            .unwrap()
            .contains("routes")
    );
}

// ---------------------------------------------------------------------------------------------
// Hang, Status, log

#[tokio::test]
async fn hang_never_answers_until_shutdown() {
    let server = ModelServer::start(Script::new([Step::Hang])).await;
    let url = format!("{}/v1/chat/completions", server.url());
    let started = Instant::now();
    let err = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap()
        .post(&url)
        .json(&opencode_request(Some(chat_tools(&["write"]))))
        .send()
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(matches!(
        server.requests()[0].reply,
        Reply::Hang { step: 0 }
    ));

    // A hanging request is released when the server shuts down.
    let pending = tokio::spawn({
        let url = url.clone();
        async move {
            client()
                .post(&url)
                .json(&opencode_request(None))
                .send()
                .await
                .map(|r| r.status().as_u16())
        }
    });
    assert!(server.wait_for_requests(2, Duration::from_secs(5)).await);
    server.shutdown();
    let status = tokio::time::timeout(Duration::from_secs(5), pending)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(status, Ok(503) | Err(_)), "{status:?}");
}

#[tokio::test]
async fn status_step_fails_every_model_request() {
    let server = ModelServer::start(Script::new([Step::Status(500)])).await;
    let anthropic = post(
        &format!("{}/v1/messages", server.url()),
        &claude_request(claude_tools(&[]), true),
    )
    .await;
    assert_eq!(anthropic.status, 500);
    let body: Value = serde_json::from_str(&anthropic.text).unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "api_error");

    // Even a request without tools (title generation).
    let chat = post(
        &format!("{}/v1/chat/completions", server.url()),
        &opencode_request(None),
    )
    .await;
    assert_eq!(chat.status, 500);
    let body: Value = serde_json::from_str(&chat.text).unwrap();
    assert!(body["error"]["message"].is_string());

    server.set_script(Script::new([Step::Status(429)]));
    let codex = post(
        &format!("{}/v1/responses", server.url()),
        &codex_request(codex_tools(false), true),
    )
    .await;
    assert_eq!(codex.status, 429);

    // Non-model endpoints still answer.
    let head = client().head(server.url()).send().await.unwrap();
    assert_eq!(head.status().as_u16(), 200);
    let statuses: Vec<Reply> = server.requests().into_iter().map(|r| r.reply).collect();
    assert_eq!(
        statuses,
        [
            Reply::Status {
                step: 0,
                status: 500
            },
            Reply::Status {
                step: 0,
                status: 500
            },
            Reply::Status {
                step: 0,
                status: 429
            },
            Reply::Http { status: 200 },
        ]
    );
}

#[tokio::test]
async fn log_records_requests_and_writes_jsonl() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("model.jsonl");
    let server = ModelServer::start(write_script()).await;
    // A request before the log file is set is written too.
    client().head(server.url()).send().await.unwrap();
    let server = server.with_log_file(&log_path);

    let body = claude_request(claude_tools(&[]), true);
    let resp = client()
        .post(format!("{}/v1/messages?beta=true", server.url()))
        .header("x-api-key", "sk-ant-fake")
        .header("anthropic-version", "2023-06-01")
        .header("User-Agent", "claude-cli/2.1.197 (external, sdk-cli)")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let broken = client()
        .post(format!("{}/v1/chat/completions", server.url()))
        .body("not json")
        .send()
        .await
        .unwrap();
    assert_eq!(broken.status().as_u16(), 400);

    let log = server.requests();
    assert_eq!(log.len(), 3);
    let call: &LoggedRequest = &log[1];
    assert_eq!(call.seq, 1);
    assert_eq!(call.method, "POST");
    assert_eq!(call.path, "/v1/messages");
    assert_eq!(call.query.as_deref(), Some("beta=true"));
    assert_eq!(call.header("Anthropic-Version"), Some("2023-06-01"));
    assert_eq!(
        call.header("user-agent"),
        Some("claude-cli/2.1.197 (external, sdk-cli)")
    );
    assert_eq!(call.body, body);
    assert!(call.is_stream());
    assert_eq!(call.model(), Some("claude-sonnet-4-5"));
    assert_eq!(call.offered_tools(), ["Bash", "Edit", "Read", "Write"]);
    assert_eq!(log[2].body, json!("not json"));
    assert_eq!(log[2].reply, Reply::Http { status: 400 });

    let lines: Vec<LoggedRequest> = std::fs::read_to_string(&log_path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines, log);

    server.clear_log();
    assert!(server.requests().is_empty());
    assert_eq!(server.offered_tools(), Vec::<Vec<String>>::new());
}

#[tokio::test]
async fn large_request_bodies_are_accepted() {
    let server = ModelServer::start(Script::text("ok")).await;
    let mut body = claude_request(claude_tools(&[]), false);
    body["system"][1]["text"] = json!("x".repeat(5 * 1024 * 1024));
    let message = post(&format!("{}/v1/messages", server.url()), &body)
        .await
        .json();
    assert_eq!(message["content"][0]["text"], "ok");
    assert!(message["usage"]["input_tokens"].as_u64().unwrap() > 1_000_000);
}

#[test]
fn start_blocking_serves_from_its_own_thread() {
    let server = ModelServer::start_blocking(Script::text("sync"));
    let url = format!("{}/v1/messages", server.url());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let message = runtime.block_on(async {
        post(&url, &claude_request(claude_tools(&[]), false))
            .await
            .json()
    });
    assert_eq!(message["content"][0]["text"], "sync");
    assert!(server.wait_for_requests_blocking(1, Duration::from_secs(1)));
    let addr = server.addr();
    drop(server);
    // The port is released once the server is dropped.
    assert!(std::net::TcpStream::connect(addr).is_err());
}

#[test]
fn script_round_trips_through_json() {
    let script = write_script()
        .then(Step::Hang)
        .then(Step::Status(503))
        .with_side_text("title");
    let text = serde_json::to_string(&script).unwrap();
    let back: Script = serde_json::from_str(&text).unwrap();
    assert_eq!(back, script);
    let minimal: Script = serde_json::from_str(r#"{"steps":[{"text":"hi"}]}"#).unwrap();
    assert_eq!(minimal, Script::text("hi"));
}
