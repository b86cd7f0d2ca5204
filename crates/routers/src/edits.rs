//! One reconcile's edits of the router objects, in Argo's call order, collected on working
//! copies so that each object gets one write (or one delete) carrying the resourceVersion it
//! was read at: a concurrent change makes the write fail with a conflict and the next
//! reconcile decides afresh.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::kinds::ObjectRef;
use crate::{Change, ChangeResult, Edit, EditResult};

enum Pending {
    Write { object: Value, create: bool },
    Delete { uid: Option<String> },
}

/// One write of a router object, as the plan carries it.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    Create(Value),
    Update(Value),
    /// Delete the object, if it still has this uid.
    Delete {
        uid: Option<String>,
    },
}

/// Working copies of the objects being edited.
#[derive(Default)]
pub struct Edits {
    objects: BTreeMap<ObjectRef, Pending>,
    order: Vec<ObjectRef>,
    /// `(reason, message)` of the Normal events to publish once the writes land.
    pub events: Vec<(&'static str, String)>,
    /// When to look again (an edit that waits for time to pass).
    pub requeue: Option<std::time::Duration>,
    /// Reasons of the router being edited that Argo publishes no event for.
    silent: &'static [&'static str],
}

impl Edits {
    /// The next edits are of a router whose updates with these reasons publish no event.
    pub fn silence(&mut self, reasons: &'static [&'static str]) {
        self.silent = reasons;
    }

    /// The object as this reconcile's earlier edits left it, else as observed.
    pub fn current<'v>(&'v self, key: &ObjectRef, observed: &'v Value) -> &'v Value {
        match self.objects.get(key) {
            Some(Pending::Write { object, .. }) => object,
            _ => observed,
        }
    }

    fn remember(&mut self, key: &ObjectRef, pending: Pending) {
        if !self.objects.contains_key(key) {
            self.order.push(key.clone());
        }
        self.objects.insert(key.clone(), pending);
    }

    /// Replaces the object with `object` without an event (a router's bookkeeping).
    pub fn stamp(&mut self, key: &ObjectRef, object: Value) {
        self.remember(
            key,
            Pending::Write {
                object,
                create: false,
            },
        );
    }

    fn publish(&mut self, event: (&'static str, String)) {
        if !self.silent.contains(&event.0) {
            self.events.push(event);
        }
    }

    /// An edit that may also delete the object; `existing` is the object as observed.
    pub fn change(
        &mut self,
        key: &ObjectRef,
        existing: Option<&Value>,
        result: ChangeResult,
    ) -> Result<(), String> {
        match result.map_err(|e| e.to_string())? {
            None => {}
            Some(Change::Write(edit)) => self.apply(key, existing.is_none(), Ok(Some(edit)))?,
            Some(Change::Delete { event }) => {
                let uid = existing
                    .and_then(|o| o.pointer("/metadata/uid"))
                    .and_then(Value::as_str)
                    .map(str::to_string);
                self.remember(key, Pending::Delete { uid });
                self.publish(event);
            }
        }
        Ok(())
    }

    /// An edit of the object; `create` when it does not exist yet.
    pub fn apply(
        &mut self,
        key: &ObjectRef,
        create: bool,
        result: EditResult,
    ) -> Result<(), String> {
        match result.map_err(|e| e.to_string())? {
            None => {}
            Some(Edit { object, event }) => {
                let create = create
                    && match self.objects.get(key) {
                        None => true,
                        Some(Pending::Write { create, .. }) => *create,
                        Some(Pending::Delete { .. }) => false,
                    };
                self.remember(key, Pending::Write { object, create });
                self.publish(event);
            }
        }
        Ok(())
    }

    /// The writes, one per changed object, in the order first changed.
    pub fn into_writes(self) -> Vec<(ObjectRef, Write)> {
        let mut objects = self.objects;
        self.order
            .into_iter()
            .filter_map(|key| {
                let write = match objects.remove(&key)? {
                    Pending::Write {
                        object,
                        create: true,
                    } => Write::Create(object),
                    Pending::Write { object, .. } => Write::Update(object),
                    Pending::Delete { uid } => Write::Delete { uid },
                };
                Some((key, write))
            })
            .collect()
    }
}
