//! A small app on siftdb, as a newcomer would write it: users, sessions that expire (a short
//! session beside a remember-me one), an event log trimmed by range deletes, and transfers
//! between accounts that fail with the app's own error type. No `Box<dyn Error>`: siftdb's
//! errors become one case of the app's, and `?` carries both.
//!
//! The app runs on a clock it moves itself, so that an hour passes in an instant; a real app
//! leaves `Options::clock` alone. The store lives in a temporary directory, so it runs as often
//! as you like.
//!
//! cargo run -p siftdb-examples --example app

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use siftdb::{Clock, Db, Keyspace, Options, WriteBatch};

/// Everything that can go wrong in the app.
#[derive(Debug)]
enum AppError {
    UnknownUser(String),
    NotLoggedIn,
    InsufficientFunds {
        account: String,
        balance: u64,
        wanted: u64,
    },
    BadBalance(String),
    Store(siftdb::Error),
}

impl From<siftdb::Error> for AppError {
    fn from(e: siftdb::Error) -> Self {
        AppError::Store(e)
    }
}

impl std::fmt::Display for AppError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AppError::UnknownUser(u) => write!(f, "no user {u}"),
            AppError::NotLoggedIn => f.write_str("not logged in (or the session expired)"),
            AppError::InsufficientFunds {
                account,
                balance,
                wanted,
            } => write!(f, "{account} holds {balance}, not {wanted}"),
            AppError::BadBalance(account) => write!(f, "the balance of {account} is not a number"),
            AppError::Store(e) => write!(f, "store: {e}"),
        }
    }
}

type AppResult<T> = Result<T, AppError>;

/// A clock the app moves by hand.
struct AppClock(AtomicU64);

impl AppClock {
    fn advance(&self, by: Duration) {
        self.0.fetch_add(by.as_secs(), Ordering::Relaxed);
    }
}

impl Clock for AppClock {
    fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(self.0.load(Ordering::Relaxed))
    }
}

const SESSION: Duration = Duration::from_secs(30 * 60);
const REMEMBER_ME: Duration = Duration::from_secs(30 * 86_400);

/// The app's store: one keyspace per kind of data.
struct App {
    db: Db,
    users: Keyspace,
    sessions: Keyspace,
    events: Keyspace,
    accounts: Keyspace,
    next_event: AtomicU64,
}

impl App {
    fn open(path: &std::path::Path, clock: Arc<AppClock>) -> AppResult<App> {
        let db = Db::open(path, Options::default().clock(clock))?;
        Ok(App {
            users: db.keyspace("users")?,
            // A session lasts half an hour unless it is given longer.
            sessions: db.keyspace_with("sessions", Options::default().ttl(SESSION))?,
            events: db.keyspace("events")?,
            accounts: db.keyspace("accounts")?,
            next_event: AtomicU64::new(0),
            db,
        })
    }

    /// Signs a user up: the user, an account and an event, in one atomic batch.
    fn sign_up(&self, user: &str, name: &str, deposit: u64) -> AppResult<()> {
        let mut batch = WriteBatch::new();
        batch.put(user, name); // names no keyspace: goes to `users`, which writes the batch
        batch.put_in(&self.accounts, user, deposit.to_string());
        batch.put_in(&self.events, self.event_key(), format!("{user} signed up"));
        self.users.write(batch)?;
        Ok(())
    }

    fn log_in(&self, user: &str, token: &str, remember_me: bool) -> AppResult<()> {
        if !self.users.contains_key(user)? {
            return Err(AppError::UnknownUser(user.into()));
        }
        match remember_me {
            true => self.sessions.put_with_ttl(token, user, REMEMBER_ME)?,
            false => self.sessions.put(token, user)?, // the keyspace's half hour
        }
        Ok(())
    }

    fn user_of(&self, token: &str) -> AppResult<String> {
        let user = self.sessions.get(token)?.ok_or(AppError::NotLoggedIn)?;
        Ok(String::from_utf8_lossy(&user).into_owned())
    }

    /// Moves `amount` from the session's user to `to`: all of it or nothing, retried if another
    /// transfer touched either account meanwhile.
    fn transfer(&self, token: &str, to: &str, amount: u64) -> AppResult<u64> {
        let from = self.user_of(token)?;
        let balance = |account: &str, v: Option<Vec<u8>>| -> AppResult<u64> {
            let v = v.ok_or_else(|| AppError::UnknownUser(account.into()))?;
            let text = String::from_utf8_lossy(&v);
            text.parse()
                .map_err(|_| AppError::BadBalance(account.into()))
        };
        let left = self.db.transaction_with(|tx| {
            let have = balance(&from, tx.get_in(&self.accounts, &from)?)?;
            let theirs = balance(to, tx.get_in(&self.accounts, to)?)?;
            if have < amount {
                return Err(AppError::InsufficientFunds {
                    account: from.clone(),
                    balance: have,
                    wanted: amount,
                });
            }
            tx.put_in(&self.accounts, &from, (have - amount).to_string())?;
            tx.put_in(&self.accounts, to, (theirs + amount).to_string())?;
            tx.put_in(
                &self.events,
                self.event_key(),
                format!("{from} paid {to} {amount}"),
            )?;
            Ok(have - amount)
        })?;
        Ok(left)
    }

    /// Adds `bonus` to an account, refusing a balance that does not parse rather than
    /// overwriting it.
    fn add_bonus(&self, account: &str, bonus: u64) -> AppResult<()> {
        self.accounts
            .try_update(account, |old| -> AppResult<Option<String>> {
                let old = old.ok_or_else(|| AppError::UnknownUser(account.into()))?;
                let n: u64 = String::from_utf8_lossy(old)
                    .parse()
                    .map_err(|_| AppError::BadBalance(account.into()))?;
                Ok(Some((n + bonus).to_string()))
            })?;
        Ok(())
    }

    /// The newest `n` events, newest first.
    fn latest_events(&self, n: usize) -> AppResult<Vec<String>> {
        self.events
            .iter()
            .rev()
            .take(n)
            .map(|kv| Ok(String::from_utf8_lossy(&kv?.1).into_owned()))
            .collect()
    }

    /// Keeps the newest `keep` events: everything before them goes in one range delete.
    fn trim_events(&self, keep: u64) -> AppResult<()> {
        let next = self.next_event.load(Ordering::Relaxed);
        self.events
            .delete_range(..event_key(next.saturating_sub(keep)))?;
        Ok(())
    }

    fn event_key(&self) -> String {
        event_key(self.next_event.fetch_add(1, Ordering::Relaxed))
    }
}

fn event_key(n: u64) -> String {
    format!("event:{n:012}")
}

fn main() -> AppResult<()> {
    let dir = tempfile::tempdir().map_err(siftdb::Error::from)?;
    let clock = Arc::new(AppClock(AtomicU64::new(1_800_000_000)));
    let app = App::open(dir.path(), clock.clone())?;

    app.sign_up("ada", "Ada Lovelace", 100)?;
    app.sign_up("bob", "Bob", 20)?;
    app.log_in("ada", "t-ada", false)?;
    app.log_in("bob", "t-bob", true)?;
    assert!(matches!(
        app.log_in("eve", "t-eve", false),
        Err(AppError::UnknownUser(_))
    ));

    println!(
        "ada pays bob 30, and has {} left",
        app.transfer("t-ada", "bob", 30)?
    );
    match app.transfer("t-ada", "bob", 500) {
        Err(e @ AppError::InsufficientFunds { .. }) => println!("refused: {e}"),
        other => panic!("expected insufficient funds, got {other:?}"),
    }
    app.accounts.put("mallory", "lots")?;
    match app.add_bonus("mallory", 5) {
        Err(e @ AppError::BadBalance(_)) => println!("refused: {e} (and left as it was)"),
        other => panic!("expected a bad balance, got {other:?}"),
    }
    assert_eq!(app.accounts.get("mallory")?, Some(b"lots".to_vec()));
    app.add_bonus("bob", 5)?;

    // An hour later, ada's half-hour session has expired; bob's remember-me one has not.
    clock.advance(Duration::from_secs(3600));
    match app.transfer("t-ada", "bob", 1) {
        Err(AppError::NotLoggedIn) => println!("ada's session expired"),
        other => panic!("expected an expired session, got {other:?}"),
    }
    println!(
        "bob pays ada 10, and has {} left",
        app.transfer("t-bob", "ada", 10)?
    );

    app.trim_events(2)?;
    println!("the latest events: {:?}", app.latest_events(10)?);
    assert_eq!(app.latest_events(10)?.len(), 2);
    for account in ["ada", "bob"] {
        let balance = app.accounts.get(account)?.unwrap_or_default();
        println!("{account}: {}", String::from_utf8_lossy(&balance));
    }
    Ok(())
}
