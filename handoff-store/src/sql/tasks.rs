//! Tasks: creating, reading, listing, and marking them changed.

use camino::{Utf8Path, Utf8PathBuf};
use rusqlite::{Connection, Row, params};

use handoff_core::{StoreError, Task, TaskAgent, TaskId};

use super::{Ctx, agent_id, execute, get, query_all, query_one, task_id};

macro_rules! task_columns {
    () => {
        "id, project_root, worktree, branch, provider, model, account, parent_id, created_at, \
         updated_at"
    };
}

const INSERT_TASK: &str = concat!(
    "INSERT INTO tasks (",
    task_columns!(),
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
);
const SELECT_TASK: &str = concat!("SELECT ", task_columns!(), " FROM tasks WHERE id = ?1");
const SELECT_TASK_FOR_WORKTREE: &str = concat!(
    "SELECT ",
    task_columns!(),
    " FROM tasks WHERE worktree = ?1 ORDER BY created_at DESC, rowid DESC LIMIT 1"
);
const SELECT_TASKS: &str = concat!(
    "SELECT ",
    task_columns!(),
    " FROM tasks ORDER BY created_at, rowid"
);
const SELECT_PROJECT_TASKS: &str = concat!(
    "SELECT ",
    task_columns!(),
    " FROM tasks WHERE project_root = ?1 ORDER BY created_at, rowid"
);
const UPDATE_AGENT: &str =
    "UPDATE tasks SET provider = ?2, model = ?3, account = ?4, updated_at = ?5 WHERE id = ?1";
const TOUCH_TASK: &str = "UPDATE tasks SET updated_at = max(updated_at, ?2) WHERE id = ?1";

fn task_row(row: &Row<'_>, c: &Ctx) -> Result<Task, StoreError> {
    Ok(Task {
        id: task_id(c, "tasks.id", get(row, "id", c)?)?,
        project_root: Utf8PathBuf::from(get::<String>(row, "project_root", c)?),
        worktree: Utf8PathBuf::from(get::<String>(row, "worktree", c)?),
        branch: get(row, "branch", c)?,
        agent: TaskAgent {
            provider: agent_id(c, "tasks.provider", get(row, "provider", c)?)?,
            model: get(row, "model", c)?,
            account: get(row, "account", c)?,
        },
        parent: get::<Option<String>>(row, "parent_id", c)?
            .map(|p| task_id(c, "tasks.parent_id", p))
            .transpose()?,
        created_at: get(row, "created_at", c)?,
        updated_at: get(row, "updated_at", c)?,
    })
}

pub(crate) fn insert_task(conn: &Connection, c: &Ctx, t: &Task) -> Result<(), StoreError> {
    execute(
        conn,
        c,
        INSERT_TASK,
        params![
            t.id.as_str(),
            t.project_root.as_str(),
            t.worktree.as_str(),
            t.branch,
            t.agent.provider.as_str(),
            t.agent.model,
            t.agent.account,
            t.parent.as_ref().map(TaskId::as_str),
            t.created_at,
            t.updated_at,
        ],
    )?;
    Ok(())
}

pub(crate) fn task(conn: &Connection, c: &Ctx, id: &TaskId) -> Result<Option<Task>, StoreError> {
    query_one(conn, c, SELECT_TASK, [id.as_str()], |r| task_row(r, c))
}

pub(crate) fn task_for_worktree(
    conn: &Connection,
    c: &Ctx,
    worktree: &Utf8Path,
) -> Result<Option<Task>, StoreError> {
    query_one(
        conn,
        c,
        SELECT_TASK_FOR_WORKTREE,
        [worktree.as_str()],
        |r| task_row(r, c),
    )
}

pub(crate) fn tasks(
    conn: &Connection,
    c: &Ctx,
    project_root: Option<&Utf8Path>,
) -> Result<Vec<Task>, StoreError> {
    match project_root {
        Some(root) => query_all(conn, c, SELECT_PROJECT_TASKS, [root.as_str()], |r| {
            task_row(r, c)
        }),
        None => query_all(conn, c, SELECT_TASKS, [], |r| task_row(r, c)),
    }
}

/// Whether the task exists.
pub(crate) fn set_agent(
    conn: &Connection,
    c: &Ctx,
    id: &TaskId,
    agent: &TaskAgent,
    now: &str,
) -> Result<bool, StoreError> {
    let n = execute(
        conn,
        c,
        UPDATE_AGENT,
        params![
            id.as_str(),
            agent.provider.as_str(),
            agent.model,
            agent.account,
            now
        ],
    )?;
    Ok(n == 1)
}

/// Marks the task changed; whether it exists.
pub(crate) fn touch(
    conn: &Connection,
    c: &Ctx,
    id: &TaskId,
    now: &str,
) -> Result<bool, StoreError> {
    Ok(execute(conn, c, TOUCH_TASK, params![id.as_str(), now])? == 1)
}
