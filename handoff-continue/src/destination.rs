//! The destination phrase of `handoff continue`: the receiver named as a person says it,
//! `"codex gpt-5 high on devbox"`, `"cursor on this machine"`, `"opencode"`.
//!
//! ```text
//! phrase = agent { model | effort } [ place ]     at most one model and one effort, either order
//! agent  = a registered agent (codex, claude, opencode, cursor, kiro, grok, copilot, gemini, qwen, …)
//!          or an alias: claude-code, cursor-agent, kiro-cli
//! effort = a level some registered agent accepts (minimal, low, medium, high, xhigh, max)
//! model  = any other word: gpt-5, o3, sonnet, claude-opus-4-1, …
//! place  = "on" machine[":"path] | "on this machine" | "here" | "locally"
//! ```
//!
//! Words are separated by white space; agent names, efforts and the place's words are matched
//! without regard to case, a model is kept as written. A word that is none of these but is
//! within two edits (one, for a word of three letters or fewer) of an agent, an effort or a
//! place word is taken for a typo and refused, so `hgih` is never sent as a model: a model so
//! named goes in `--model`. A phrase is read before anything changes, and a flag that says
//! something else (`--to`, `--model`, `--effort`, `--on`) is refused; where both say the same,
//! the flag's value is used.

use handoff_core::{AgentId, ContinueDestination, Registry};

use crate::ContinueRequest;

/// The longest phrase, in bytes.
const MAX_PHRASE: usize = 512;

/// Other names of the built-in agents: their executables' names and Claude Code's full name.
const ALIASES: [(&str, AgentId); 3] = [
    ("claude-code", AgentId::CLAUDE),
    ("cursor-agent", AgentId::CURSOR),
    ("kiro-cli", AgentId::KIRO),
];

/// The words a phrase is read with: the registered agents and their aliases, and every effort
/// level one of them accepts.
#[derive(Debug, Clone)]
pub struct Vocabulary {
    agents: Vec<(String, AgentId)>,
    efforts: Vec<String>,
}

impl Vocabulary {
    /// The words of the agents in `registry`.
    pub fn of(registry: &Registry) -> Vocabulary {
        let ids = registry.ids();
        let mut agents: Vec<(String, AgentId)> = ids
            .iter()
            .map(|id| (id.as_str().to_owned(), id.clone()))
            .collect();
        for (alias, id) in ALIASES {
            if ids.contains(&id) && !agents.iter().any(|(name, _)| name == alias) {
                agents.push((alias.to_owned(), id));
            }
        }
        let mut efforts: Vec<String> = registry
            .iter()
            .flat_map(|p| p.spec().effort.iter().map(|e| e.to_ascii_lowercase()))
            .collect();
        efforts.sort();
        efforts.dedup();
        Vocabulary { agents, efforts }
    }

    fn agent(&self, word: &str) -> Option<&AgentId> {
        self.agents
            .iter()
            .find(|(name, _)| name == word)
            .map(|(_, id)| id)
    }

    /// Every word with a meaning, and what it is, for naming a near miss.
    fn keywords(&self) -> impl Iterator<Item = (&str, &'static str)> {
        self.agents
            .iter()
            .map(|(name, _)| (name.as_str(), "the agent"))
            .chain(self.efforts.iter().map(|e| (e.as_str(), "the effort")))
            .chain(PLACE_WORDS.iter().map(|w| (*w, "the place word")))
    }
}

/// The words of a place.
const PLACE_WORDS: [&str; 5] = ["on", "this", "machine", "here", "locally"];

/// Reads `phrase`; the error is one line that names the word it stopped at.
pub fn parse(phrase: &str, vocabulary: &Vocabulary) -> Result<ContinueDestination, String> {
    if phrase.len() > MAX_PHRASE {
        return Err(format!(
            "the destination phrase is longer than {MAX_PHRASE} bytes"
        ));
    }
    if phrase.chars().any(|c| c.is_control() && !c.is_whitespace()) {
        return Err("the destination phrase holds a control character".to_owned());
    }
    let words: Vec<&str> = phrase.split_whitespace().collect();
    let Some((first, rest)) = words.split_first() else {
        return Err("the destination phrase is empty: it starts with the agent's name".to_owned());
    };
    let quoted = |word: &str| format!("'{}'", handoff_core::printable(word, true));
    let Some(agent) = vocabulary.agent(&first.to_ascii_lowercase()).cloned() else {
        let known: Vec<&str> = vocabulary.agents.iter().map(|(n, _)| n.as_str()).collect();
        let hint = near_miss(first, vocabulary)
            .map(|(word, _)| format!(" (did you mean '{word}'?)"))
            .unwrap_or_default();
        return Err(format!(
            "destination phrase: {} is not an agent{hint}; it starts with one of {}",
            quoted(first),
            known.join(", ")
        ));
    };
    let mut read = ContinueDestination {
        phrase: phrase.to_owned(),
        agent,
        model: None,
        effort: None,
        on: None,
        this_machine: false,
    };
    let mut at = 0;
    while at < rest.len() {
        let word = rest[at];
        let lower = word.to_ascii_lowercase();
        at += 1;
        match lower.as_str() {
            "on" => {
                let after = |extra: &str| {
                    format!(
                        "destination phrase: {} comes after the place, which ends the phrase",
                        quoted(extra)
                    )
                };
                match &rest[at..] {
                    [] => {
                        return Err(
                            "destination phrase: 'on' needs a machine: 'on <machine>[:<path>]' \
                             or 'on this machine'"
                                .to_owned(),
                        );
                    }
                    [this, machine, extra @ ..]
                        if this.eq_ignore_ascii_case("this")
                            && machine.eq_ignore_ascii_case("machine") =>
                    {
                        if let Some(extra) = extra.first() {
                            return Err(after(extra));
                        }
                        read.this_machine = true;
                    }
                    [this, ..] if this.eq_ignore_ascii_case("this") => {
                        return Err(format!(
                            "destination phrase: {} after 'on' needs 'machine' ('on this machine')",
                            quoted(this)
                        ));
                    }
                    [machine, ..]
                        if PLACE_WORDS.iter().any(|w| machine.eq_ignore_ascii_case(w)) =>
                    {
                        return Err(format!(
                            "destination phrase: {} after 'on' is not a machine",
                            quoted(machine)
                        ));
                    }
                    [machine] => read.on = Some((*machine).to_owned()),
                    [_, extra, ..] => return Err(after(extra)),
                }
                at = rest.len();
            }
            "here" | "locally" => {
                read.this_machine = true;
                if let Some(extra) = rest.get(at) {
                    return Err(format!(
                        "destination phrase: {} comes after the place, which ends the phrase",
                        quoted(extra)
                    ));
                }
            }
            _ if vocabulary.efforts.contains(&lower) => {
                if let Some(effort) = &read.effort {
                    return Err(format!(
                        "destination phrase: {} is a second effort (the first is '{effort}')",
                        quoted(word)
                    ));
                }
                read.effort = Some(lower);
            }
            _ if vocabulary.agent(&lower).is_some() => {
                return Err(format!(
                    "destination phrase: {} is a second agent; a phrase names one",
                    quoted(word)
                ));
            }
            _ if lower == "this" || lower == "machine" => {
                return Err(format!(
                    "destination phrase: {} belongs after 'on' ('on this machine')",
                    quoted(word)
                ));
            }
            _ => {
                if let Some((keyword, what)) = near_miss(word, vocabulary) {
                    return Err(format!(
                        "destination phrase: {} is close to {what} '{keyword}' but is not it; \
                         write '{keyword}', or give a model so named with --model",
                        quoted(word)
                    ));
                }
                if let Some(model) = &read.model {
                    return Err(format!(
                        "destination phrase: {} is not a known word (the model is already \
                         '{model}'); it reads: agent, model, effort, 'on <machine>'",
                        quoted(word)
                    ));
                }
                handoff_core::check_model(word).map_err(|e| {
                    format!("destination phrase: {}", e.replace("--model", "a model"))
                })?;
                read.model = Some(word.to_owned());
            }
        }
    }
    Ok(read)
}

/// The keyword `word` is a typo of, if any: one within two edits (one, for a keyword of three
/// letters or fewer, none for one of two), unless `word` holds the keyword whole as one of its
/// `-`, `.`, `/` or `_` separated parts (`grok-4` is a model, not a typo of `grok`).
fn near_miss<'v>(word: &str, vocabulary: &'v Vocabulary) -> Option<(&'v str, &'static str)> {
    let lower = word.to_ascii_lowercase();
    let parts: Vec<&str> = lower.split(['-', '.', '/', '_']).collect();
    vocabulary
        .keywords()
        .filter(|(keyword, _)| !parts.contains(keyword))
        .filter(|(keyword, _)| {
            let allowed = match keyword.chars().count() {
                0..=2 => 0,
                3 => 1,
                _ => 2,
            };
            allowed > 0 && edit_distance(&lower, keyword) <= allowed
        })
        .min_by_key(|(keyword, _)| edit_distance(&lower, keyword))
}

/// The number of single-character insertions, deletions, substitutions and swaps of two
/// neighbours that turn `a` into `b` (optimal string alignment).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Rows i-2, i-1 and i of the table.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut last: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut row = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (last[j] + 1).min(row[j - 1] + 1).min(last[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(before[j - 2] + 1);
            }
            row[j] = best;
        }
        before = std::mem::replace(&mut last, row);
    }
    last[b.len()]
}

/// The request a continuation runs: `request` with its destination phrase read and what the
/// phrase names filled in where no flag says it, and the reading. A phrase that does not read,
/// or says something a flag contradicts, and a request that names no receiver at all, are
/// refused in one line.
pub fn resolve(
    request: &ContinueRequest,
    registry: &Registry,
) -> Result<(ContinueRequest, Option<ContinueDestination>), String> {
    let Some(phrase) = &request.destination else {
        if request.to.is_none() {
            return Err(
                "name the receiver: a destination phrase (\"codex gpt-5 high\") or --to <agent>"
                    .to_owned(),
            );
        }
        return Ok((request.clone(), None));
    };
    let read = parse(phrase, &Vocabulary::of(registry))?;
    agrees(&read, request)?;
    let mut resolved = request.clone();
    resolved.to = Some(
        request
            .to
            .clone()
            .unwrap_or_else(|| read.agent.as_str().to_owned()),
    );
    resolved.model = request.model.clone().or_else(|| read.model.clone());
    resolved.effort = request.effort.clone().or_else(|| read.effort.clone());
    resolved.on = request.on.clone().or_else(|| read.on.clone());
    Ok((resolved, Some(read)))
}

/// Refuses a reading that says something other than the request's flags; the error names the
/// word and the flag.
fn agrees(read: &ContinueDestination, flags: &ContinueRequest) -> Result<(), String> {
    let clash = |flag: &str, flag_value: &str, phrase_value: &str| {
        Err(format!(
            "the destination phrase says '{}' but {flag} says '{}'; say it once, or the same \
             in both",
            handoff_core::printable(phrase_value, true),
            handoff_core::printable(flag_value, true)
        ))
    };
    if let Some(to) = flags.to.as_deref()
        && to != read.agent.as_str()
    {
        return clash("--to", to, read.agent.as_str());
    }
    if let (Some(flag), Some(phrase)) = (flags.model.as_deref(), read.model.as_deref())
        && flag != phrase
    {
        return clash("--model", flag, phrase);
    }
    if let (Some(flag), Some(phrase)) = (flags.effort.as_deref(), read.effort.as_deref())
        && flag != phrase
    {
        return clash("--effort", flag, phrase);
    }
    if let Some(flag) = flags.on.as_deref() {
        if read.this_machine {
            return clash("--on", flag, "this machine");
        }
        if let Some(phrase) = read.on.as_deref()
            && flag != phrase
        {
            return clash("--on", flag, phrase);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn vocabulary() -> Vocabulary {
        Vocabulary::of(&handoff_adapters::default_registry())
    }

    /// (phrase, agent, model, effort, on, this machine)
    type Reading = (
        &'static str,
        &'static str,
        Option<&'static str>,
        Option<&'static str>,
        Option<&'static str>,
        bool,
    );

    #[test]
    fn phrases_read_as_a_person_means_them() {
        let table: &[Reading] = &[
            ("opencode", "opencode", None, None, None, false),
            (
                "codex gpt-5 high on devbox",
                "codex",
                Some("gpt-5"),
                Some("high"),
                Some("devbox"),
                false,
            ),
            ("cursor on this machine", "cursor", None, None, None, true),
            (
                "Codex HIGH gpt-5",
                "codex",
                Some("gpt-5"),
                Some("high"),
                None,
                false,
            ),
            (
                "claude opus max here",
                "claude",
                Some("opus"),
                Some("max"),
                None,
                true,
            ),
            (
                "claude-code sonnet",
                "claude",
                Some("sonnet"),
                None,
                None,
                false,
            ),
            ("cursor-agent locally", "cursor", None, None, None, true),
            ("kiro-cli xhigh", "kiro", None, Some("xhigh"), None, false),
            ("codex o3", "codex", Some("o3"), None, None, false),
            (
                "codex o4-mini low",
                "codex",
                Some("o4-mini"),
                Some("low"),
                None,
                false,
            ),
            ("grok grok-4", "grok", Some("grok-4"), None, None, false),
            (
                "codex codex-mini-latest",
                "codex",
                Some("codex-mini-latest"),
                None,
                None,
                false,
            ),
            (
                "opencode anthropic/claude-sonnet-4-5 minimal",
                "opencode",
                Some("anthropic/claude-sonnet-4-5"),
                Some("minimal"),
                None,
                false,
            ),
            (
                "codex gpt-5 on me@box:/srv/repo",
                "codex",
                Some("gpt-5"),
                None,
                Some("me@box:/srv/repo"),
                false,
            ),
            (
                "  codex \t medium  ",
                "codex",
                None,
                Some("medium"),
                None,
                false,
            ),
            ("claude On This Machine", "claude", None, None, None, true),
        ];
        let vocabulary = vocabulary();
        for (phrase, agent, model, effort, on, here) in table {
            let read = parse(phrase, &vocabulary).unwrap_or_else(|e| panic!("{phrase}: {e}"));
            assert_eq!(read.agent.as_str(), *agent, "{phrase}");
            assert_eq!(read.model.as_deref(), *model, "{phrase}");
            assert_eq!(read.effort.as_deref(), *effort, "{phrase}");
            assert_eq!(read.on.as_deref(), *on, "{phrase}");
            assert_eq!(read.this_machine, *here, "{phrase}");
            assert_eq!(read.phrase, *phrase);
        }
    }

    #[test]
    fn unknown_words_and_near_misses_are_refused_by_name() {
        // (phrase, what the one-line error must name)
        let table: &[(&str, &str)] = &[
            ("", "empty"),
            ("   ", "empty"),
            (
                "codx gpt-5",
                "'codx' is not an agent (did you mean 'codex'?)",
            ),
            (
                "opencdoe",
                "'opencdoe' is not an agent (did you mean 'opencode'?)",
            ),
            ("aider", "'aider' is not an agent"),
            ("codex hgih", "'hgih' is close to the effort 'high'"),
            ("codex gpt-5 hihg", "'hihg' is close to the effort 'high'"),
            ("codex medum", "'medum' is close to the effort 'medium'"),
            ("codex lwo", "'lwo' is close to the effort 'low'"),
            ("codex xhihg", "'xhigh'"),
            ("claude maxx", "'maxx' is close to the effort 'max'"),
            (
                "codex minimla",
                "'minimla' is close to the effort 'minimal'",
            ),
            ("codex cursr", "'cursr' is close to the agent 'cursor'"),
            (
                "codex gpt-5 hree",
                "'hree' is close to the place word 'here'",
            ),
            ("codex gpt-5 on", "'on' needs a machine"),
            ("codex on this", "'this' after 'on' needs 'machine'"),
            ("codex on devbox now", "'now' comes after the place"),
            ("codex here gpt-5", "'gpt-5' comes after the place"),
            ("codex this machine", "'this' belongs after 'on'"),
            ("codex high low", "'low' is a second effort"),
            (
                "codex gpt-5 o3",
                "'o3' is not a known word (the model is already 'gpt-5')",
            ),
            ("codex claude", "'claude' is a second agent"),
            ("codex -rf", "a model must not start with '-'"),
            ("codex gpt\u{7}5", "control character"),
        ];
        let vocabulary = vocabulary();
        for (phrase, named) in table {
            let err = parse(phrase, &vocabulary).expect_err(phrase);
            assert!(err.contains(named), "{phrase:?}: {err}");
            assert!(!err.contains('\n'), "{phrase:?}: {err}");
        }
        let long = format!("codex {}", "a".repeat(MAX_PHRASE));
        assert!(
            parse(&long, &vocabulary)
                .unwrap_err()
                .contains("longer than")
        );
    }

    /// A request with `flags` (to, model, effort, on) and `phrase`.
    fn request(
        phrase: Option<&str>,
        (to, model, effort, on): (Option<&str>, Option<&str>, Option<&str>, Option<&str>),
    ) -> ContinueRequest {
        let mut req = ContinueRequest::new("", "/w", crate::NoteInput::Stdin);
        req.to = to.map(str::to_owned);
        req.model = model.map(str::to_owned);
        req.effort = effort.map(str::to_owned);
        req.on = on.map(str::to_owned);
        req.destination = phrase.map(str::to_owned);
        req
    }

    #[test]
    fn a_flag_that_says_otherwise_is_refused() {
        let registry = handoff_adapters::default_registry();
        let phrase = Some("codex gpt-5 high on devbox");
        let all = (Some("codex"), Some("gpt-5"), Some("high"), Some("devbox"));
        let (resolved, read) = resolve(&request(phrase, all), &registry).unwrap();
        assert_eq!(read.unwrap().model.as_deref(), Some("gpt-5"));
        assert_eq!(resolved, request(phrase, all));
        let (resolved, _) = resolve(&request(phrase, (None, None, None, None)), &registry).unwrap();
        assert_eq!(resolved, request(phrase, all));
        for (flags, named) in [
            ((Some("claude"), None, None, None), "--to says 'claude'"),
            ((None, Some("o3"), None, None), "--model says 'o3'"),
            ((None, None, Some("low"), None), "--effort says 'low'"),
            ((None, None, None, Some("other")), "--on says 'other'"),
        ] {
            let err = resolve(&request(phrase, flags), &registry).unwrap_err();
            assert!(err.contains(named), "{err}");
        }
        let err = resolve(
            &request(Some("codex here"), (None, None, None, Some("devbox"))),
            &registry,
        )
        .unwrap_err();
        assert!(
            err.contains("'this machine' but --on says 'devbox'"),
            "{err}"
        );
        // An alias names the same agent as its id.
        resolve(
            &request(Some("claude-code"), (Some("claude"), None, None, None)),
            &registry,
        )
        .unwrap();
        // Neither a phrase nor --to.
        let err = resolve(&request(None, (None, None, None, None)), &registry).unwrap_err();
        assert!(err.contains("name the receiver"), "{err}");
    }

    #[test]
    fn edit_distance_counts_a_swap_as_one() {
        assert_eq!(edit_distance("hgih", "high"), 1);
        assert_eq!(edit_distance("high", "high"), 0);
        assert_eq!(edit_distance("", "low"), 3);
        assert_eq!(edit_distance("o3", "low"), 2);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    fn word() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(vec![
                "codex",
                "claude",
                "opencode",
                "cursor",
                "kiro",
                "grok",
                "claude-code",
                "high",
                "low",
                "xhigh",
                "max",
                "on",
                "this",
                "machine",
                "here",
                "locally",
                "gpt-5",
                "o3",
                "devbox",
                "hgih",
                "codx",
                "sonnet",
            ])
            .prop_map(str::to_owned),
            "[a-zA-Z0-9@:/._-]{1,12}",
            ".{0,6}",
        ]
    }

    proptest! {
        /// Any text reads or is refused in one line, never a panic; and a reading that agrees
        /// with the flags leaves each flag's value in force.
        #[test]
        fn any_phrase_reads_or_is_refused_and_flags_win(
            words in prop::collection::vec(word(), 0..7),
            to in prop::option::of(prop::sample::select(vec!["codex", "claude", "opencode"])),
            model in prop::option::of(prop::sample::select(vec!["gpt-5", "o3", "sonnet"])),
            effort in prop::option::of(prop::sample::select(vec!["low", "high", "max"])),
            on in prop::option::of(prop::sample::select(vec!["devbox", "me@box:/srv"])),
        ) {
            let phrase = words.join(" ");
            let registry = handoff_adapters::default_registry();
            let req = request(Some(&phrase), (to, model, effort, on));
            match resolve(&req, &registry) {
                Err(err) => prop_assert!(!err.contains('\n') && !err.is_empty()),
                Ok((resolved, read)) => {
                    let read = read.expect("a reading");
                    prop_assert_eq!(resolved.to.as_deref(), Some(to.unwrap_or(read.agent.as_str())));
                    if let Some(m) = model { prop_assert_eq!(resolved.model.as_deref(), Some(m)); }
                    if let Some(e) = effort { prop_assert_eq!(resolved.effort.as_deref(), Some(e)); }
                    if let Some(o) = on { prop_assert_eq!(resolved.on.as_deref(), Some(o)); }
                    if read.this_machine { prop_assert_eq!(resolved.on, None); }
                }
            }
        }
    }
}
