//! Multi-turn sessions: a conversation dataset ([`crate::import`]) as the items a run sends,
//! either every user turn of each conversation in order (`conversation_turns = "sessions"`) or
//! its first turn only (`"first"`), and the history a session sends on each turn: the system
//! messages, every earlier user turn followed by the answer the server actually streamed for it,
//! then the turn's own user message.

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use serde_json::{Value, json};

use crate::config::WorkloadConfig;
use crate::import::Conversation;
use crate::workload::{LengthBasis, Payload, WorkItem, Workload};

pub use crate::config::TurnMode;

/// One session: its system messages and the workload items of its user turns
/// (`first_item..first_item + turns`).
#[derive(Clone, Debug, PartialEq)]
pub struct Session {
    pub system: Vec<Value>,
    pub first_item: usize,
    pub turns: usize,
}

/// A conversation dataset as workload items, with its sessions (sessions mode) and each item's
/// recorded answer (for `max_tokens_from_answer`).
#[derive(Clone, Debug)]
pub struct Imported {
    pub workload: Workload,
    pub sessions: Option<Vec<Session>>,
    /// Per workload item, the answer the dataset recorded for its user turn.
    pub answers: Vec<Option<String>>,
}

fn message(role: &str, content: &str) -> Value {
    json!({"role": role, "content": content})
}

/// The items of `conversations` as `mode` asks (conversations shuffled by `cfg.seed` when
/// `cfg.shuffle`); every item requests `cfg.max_tokens` until answers set it.
pub fn import(
    mut conversations: Vec<Conversation>,
    mode: TurnMode,
    cfg: &WorkloadConfig,
) -> Imported {
    if cfg.shuffle {
        conversations.shuffle(&mut StdRng::seed_from_u64(cfg.seed));
    }
    let item = |messages: Vec<Value>| WorkItem {
        payload: Payload::Messages(messages),
        target_tokens: None,
        max_tokens: cfg.max_tokens,
        response_format: None,
        tools: None,
        tool_choice: None,
    };
    let mut items = Vec::new();
    let mut answers = Vec::new();
    let mut sessions = Vec::new();
    for c in conversations {
        let system: Vec<Value> = c.system.iter().map(|s| message("system", s)).collect();
        match mode {
            TurnMode::First => {
                let first = &c.turns[0];
                let mut m = system;
                m.push(message("user", &first.user));
                items.push(item(m));
                answers.push(first.answer.clone());
            }
            TurnMode::Sessions => {
                sessions.push(Session { system, first_item: items.len(), turns: c.turns.len() });
                for t in &c.turns {
                    items.push(item(vec![message("user", &t.user)]));
                    answers.push(t.answer.clone());
                }
            }
        }
    }
    let sessions = (mode == TurnMode::Sessions).then_some(sessions);
    Imported { workload: Workload { items, basis: LengthBasis::Dataset }, sessions, answers }
}

/// The messages a session has exchanged so far.
#[derive(Clone, Debug, PartialEq)]
pub struct History {
    messages: Vec<Value>,
}

impl History {
    /// A session's history before its first turn: its system messages.
    pub fn new(session: &Session) -> History {
        History { messages: session.system.clone() }
    }

    /// The messages of the next turn: the history, then the turn's own (user) messages.
    pub fn request(&self, turn: &[Value]) -> Vec<Value> {
        let mut m = self.messages.clone();
        m.extend_from_slice(turn);
        m
    }

    /// After a turn's answer arrived: its messages and the answer, verbatim, join the history.
    pub fn answered(&mut self, turn: &[Value], answer: &str) {
        self.messages.extend_from_slice(turn);
        self.messages.push(message("assistant", answer));
    }
}

/// Output tokens of a recorded answer when the target offers no tokenizer: one per
/// whitespace-separated word (the simulator's tokenizer), at least one.
pub fn approximate_tokens(answer: &str) -> u32 {
    (answer.split_whitespace().count() as u32).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::Exchange;

    fn conv(system: &[&str], turns: &[(&str, Option<&str>)]) -> Conversation {
        Conversation {
            system: system.iter().map(|s| s.to_string()).collect(),
            turns: turns
                .iter()
                .map(|(u, a)| Exchange { user: u.to_string(), answer: a.map(str::to_string) })
                .collect(),
            line: 1,
        }
    }

    #[test]
    fn sessions_hold_every_turn_and_first_mode_only_the_first() {
        let cfg = WorkloadConfig { shuffle: false, max_tokens: 7, ..WorkloadConfig::default() };
        let convs = vec![
            conv(&["sys"], &[("a", Some("A A")), ("b", None)]),
            conv(&[], &[("c", Some("C"))]),
        ];
        let s = import(convs.clone(), TurnMode::Sessions, &cfg);
        assert_eq!(s.workload.len(), 3);
        let sessions = s.sessions.unwrap();
        assert_eq!(
            sessions,
            vec![
                Session { system: vec![message("system", "sys")], first_item: 0, turns: 2 },
                Session { system: vec![], first_item: 2, turns: 1 },
            ]
        );
        assert_eq!(s.answers, vec![Some("A A".into()), None, Some("C".into())]);
        assert_eq!(s.workload.items[1].payload, Payload::Messages(vec![message("user", "b")]));
        assert!(s.workload.items.iter().all(|i| i.max_tokens == 7));
        let f = import(convs, TurnMode::First, &cfg);
        assert!(f.sessions.is_none());
        assert_eq!(f.workload.len(), 2);
        assert_eq!(
            f.workload.items[0].payload,
            Payload::Messages(vec![message("system", "sys"), message("user", "a")])
        );
        assert_eq!(f.answers, vec![Some("A A".into()), Some("C".into())]);
    }

    #[test]
    fn the_history_holds_earlier_turns_and_their_answers_verbatim() {
        let session = Session { system: vec![message("system", "s")], first_item: 0, turns: 3 };
        let mut h = History::new(&session);
        let t1 = [message("user", "one")];
        assert_eq!(h.request(&t1), vec![message("system", "s"), message("user", "one")]);
        h.answered(&t1, " first  answer\n");
        let t2 = [message("user", "two")];
        assert_eq!(
            h.request(&t2),
            vec![
                message("system", "s"),
                message("user", "one"),
                message("assistant", " first  answer\n"),
                message("user", "two"),
            ]
        );
    }

    #[test]
    fn approximate_tokens_count_words_and_never_zero() {
        assert_eq!(approximate_tokens(" a b  c\n"), 3);
        assert_eq!(approximate_tokens(""), 1);
    }
}
