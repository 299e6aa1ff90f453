//! Every ranked shape of every registered agent: the table `handoff capabilities` lists and the
//! README renders.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Isolation, RunShape};
use crate::names::{AgentId, Mode};
use crate::provider::{Provider, Registry};

/// One ranked case of an agent's table: the modes and grants it covers and their isolation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IsolationCase {
    /// The modes it covers: `build`, `phase`, `review`, `verify`, `advice`.
    pub modes: Vec<String>,
    /// Shell granted.
    pub bash: bool,
    /// Web search granted; `null` when it makes no difference.
    pub web_search: Option<bool>,
    /// Whether the run may ask for nested advice; `null` when it makes no difference.
    pub nested: Option<bool>,
    /// The isolation.
    pub isolation: Isolation,
}

/// One row of [`table`]: an agent's case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IsolationRow {
    /// The agent.
    pub agent: AgentId,
    /// The case.
    #[serde(flatten)]
    pub case: IsolationCase,
}

/// The five kinds of run, as the table names them.
const KINDS: [(&str, Option<Mode>); 5] = [
    ("build", Some(Mode::Build)),
    ("phase", Some(Mode::Phase)),
    ("review", Some(Mode::Review)),
    ("verify", Some(Mode::Verify)),
    ("advice", None),
];

/// Ranked variants of one grant, each with the cases below it; one variant (`None`) when they
/// all rank alike.
type Ranked = Vec<(Option<bool>, Isolation)>;

/// `each` (a value of a grant or switch → what it ranks as) collapsed to one `None` entry when
/// there are several values and all rank alike.
fn collapse<T: Clone + PartialEq>(each: Vec<(bool, T)>) -> Vec<(Option<bool>, T)> {
    if each.len() > 1 && each.windows(2).all(|p| p[0].1 == p[1].1) {
        each.into_iter().take(1).map(|(_, t)| (None, t)).collect()
    } else {
        each.into_iter().map(|(v, t)| (Some(v), t)).collect()
    }
}

/// Every shape `provider` accepts, ranked: per kind of run (kinds with the same ranking for
/// every grant are one case), bash granted before withheld, web search withheld before
/// granted; web search or nested advice is one case (`null`) where it makes no difference.
pub fn cases(provider: &dyn Provider) -> Vec<IsolationCase> {
    cases_where(provider, true)
}

/// [`cases`] ranked as on a machine where handoff's own sandbox can run (`handoff_sandbox`)
/// or cannot.
pub fn cases_where(provider: &dyn Provider, handoff_sandbox: bool) -> Vec<IsolationCase> {
    let g = provider.spec().grants;
    let bash: Vec<bool> = [(true, g.bash), (false, g.bash_disable)]
        .into_iter()
        .filter_map(|(b, ok)| ok.then_some(b))
        .collect();
    let web: Vec<bool> = if g.web_search {
        vec![false, true]
    } else {
        vec![false]
    };
    let nested: Vec<bool> = if g.nested_source {
        vec![false, true]
    } else {
        vec![false]
    };
    // Per kind: (bash, web, nested) → isolation, in table order.
    type Row = (bool, Option<bool>, Option<bool>, Isolation);
    let mut groups: Vec<(Vec<String>, Vec<Row>)> = Vec::new();
    for (name, mode) in KINDS {
        if mode.is_some_and(Mode::writes) && !g.write {
            continue;
        }
        let mut ranked: Vec<Row> = Vec::new();
        for &b in &bash {
            let per_web: Vec<(bool, Ranked)> = web
                .iter()
                .map(|&w| {
                    let each = nested
                        .iter()
                        .map(|&n| {
                            let mut shape = RunShape::new(mode, b, w, n);
                            shape.handoff_sandbox = handoff_sandbox;
                            (n, provider.isolation(&shape))
                        })
                        .collect();
                    (w, collapse(each))
                })
                .collect();
            for (w, per_nested) in collapse(per_web) {
                ranked.extend(per_nested.into_iter().map(|(n, i)| (b, w, n, i)));
            }
        }
        match groups.iter_mut().find(|(_, r)| *r == ranked) {
            Some((names, _)) => names.push(name.to_owned()),
            None => groups.push((vec![name.to_owned()], ranked)),
        }
    }
    groups
        .into_iter()
        .flat_map(|(modes, ranked)| {
            ranked
                .into_iter()
                .map(move |(bash, web_search, nested, isolation)| IsolationCase {
                    modes: modes.clone(),
                    bash,
                    web_search,
                    nested,
                    isolation,
                })
        })
        .collect()
}

/// Every registered agent's [`cases`], in registration order.
pub fn table(registry: &Registry) -> Vec<IsolationRow> {
    registry
        .iter()
        .flat_map(|p| {
            let agent = p.spec().id.clone();
            cases(p.as_ref()).into_iter().map(move |case| IsolationRow {
                agent: agent.clone(),
                case,
            })
        })
        .collect()
}

/// [`table`] as a Markdown table (the README's isolation table).
pub fn render_markdown(rows: &[IsolationRow]) -> String {
    let yes = |b: bool| if b { "yes" } else { "no" };
    let mut out = String::from(
        "| agent | modes | bash | web | may ask advice | enforcement | filesystem write | \
         filesystem read | network | unix sockets | processes |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for row in rows {
        let c = &row.case;
        let i = &c.isolation;
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            row.agent,
            c.modes.join(", "),
            yes(c.bash),
            c.web_search.map_or("either", yes),
            c.nested.map_or("either", yes),
            i.enforcement,
            i.filesystem_write,
            i.filesystem_read,
            i.network,
            i.unix_sockets,
            i.process,
        ));
    }
    out
}
