//! What the shared `main` hands every command: the diagnostics printer, the common flags,
//! the environment, stdin, read once (no tool reads stdin itself, and no global holds it), and
//! the project, resolved when first asked for.

use std::any::Any;
use std::cell::{OnceCell, RefCell};
use std::io::{IsTerminal, Read};

use super::envelope::Stage;
use super::input::{too_large, Input, MAX_STDIN_BYTES};
use super::{CommonArgs, Diag, Envelope, Failure};

pub use super::env::Env;

pub struct Context {
    diag: Diag,
    common: CommonArgs,
    env: Env,
    stage: Option<&'static dyn Stage>,
    /// stdin's bytes (`None`: a terminal, closed, or `-n`), or why they could not be read.
    stdin: Result<Option<Vec<u8>>, Failure>,
    input: OnceCell<Result<Input, Failure>>,
    /// The envelope stdin held, once parsed: a failure prints it with the stage's section
    /// failed, so the pipeline's release can still roll back.
    received: RefCell<Option<Envelope>>,
    /// The project the command works on, once resolved. cli/ sits below claude/, which
    /// defines the project, so the slot holds it untyped; `claude::paths` alone fills and
    /// reads it (`Context::project`), with its type.
    project: OnceCell<Result<Box<dyn Any>, Failure>>,
    /// stdin and stdout are the command's own channel (see [`Context::stdio_channel`]).
    stdio: bool,
}

impl Context {
    /// Reads stdin now, under the stdin rule (see [`read_stdin`]).
    pub fn new(
        diag: Diag,
        common: CommonArgs,
        env: Env,
        stage: Option<&'static dyn Stage>,
    ) -> Self {
        let stdin = read_stdin(common.null_input);
        Context::with_stdin(diag, common, env, stage, stdin)
    }

    /// A context whose stdin is given (tests, and the commands that run other commands).
    pub fn with_stdin(
        diag: Diag,
        common: CommonArgs,
        env: Env,
        stage: Option<&'static dyn Stage>,
        stdin: Result<Option<Vec<u8>>, Failure>,
    ) -> Self {
        Context {
            diag,
            common,
            env,
            stage,
            stdin,
            input: OnceCell::new(),
            received: RefCell::new(None),
            project: OnceCell::new(),
            stdio: false,
        }
    }

    /// Marks stdin and stdout as the command's own channel: the shared `main` read nothing
    /// from stdin and prints no document (see [`super::Binary::STDIO_SUBCOMMANDS`]).
    pub(super) fn owning_stdio(mut self) -> Self {
        self.stdio = true;
        self
    }

    /// stdin and stdout, for a command that speaks its own protocol on them (`dream-run
    /// tool-relay`: MCP). Only such a command gets them: for any other, stdin was read (or
    /// left alone) by the shared `main`, and stdout holds its one document.
    pub fn stdio_channel(
        &self,
    ) -> Result<(std::io::StdinLock<'static>, std::io::StdoutLock<'static>), Failure> {
        if !self.stdio {
            return Err(Failure::environment(
                "stdin and stdout are not this command's channel (a dreamkit bug)",
            ));
        }
        Ok((std::io::stdin().lock(), std::io::stdout().lock()))
    }

    pub fn diag(&self) -> &Diag {
        &self.diag
    }

    pub fn common(&self) -> &CommonArgs {
        &self.common
    }

    /// The process environment, as it was when the tool started.
    pub fn env(&self) -> &Env {
        &self.env
    }

    /// stdin as one JSON document: nothing, a hook payload or an envelope. Parsed once; an
    /// envelope is remembered for the failure document and the signal handler's.
    pub fn input(&self) -> Result<Input, Failure> {
        self.input
            .get_or_init(|| {
                let input = match &self.stdin {
                    Ok(Some(bytes)) => Input::parse(bytes)?,
                    Ok(None) => Input::Nothing,
                    Err(failure) => return Err(failure.clone()),
                };
                if let Input::Envelope(envelope) = &input {
                    self.remember(envelope);
                }
                Ok(input)
            })
            .clone()
    }

    /// stdin as plain text (`suggest check`): `None` when there is none or it is blank.
    pub fn stdin_text(&self) -> Result<Option<String>, Failure> {
        let bytes = match &self.stdin {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Ok(None),
            Err(failure) => return Err(failure.clone()),
        };
        if bytes.len() as u64 > MAX_STDIN_BYTES {
            return Err(too_large());
        }
        let text = std::str::from_utf8(bytes)
            .map_err(|e| Failure::bad_input(format!("stdin is not UTF-8 text: {e}")))?;
        Ok((!text.trim().is_empty()).then(|| text.to_string()))
    }

    /// The envelope stdin held, if it held one and a command asked for it.
    pub fn received_envelope(&self) -> Option<Envelope> {
        self.received.borrow().clone()
    }

    /// The value `resolve` gave the first time it was asked for (a failure too): what
    /// `claude::paths` keeps of the project for the rest of the command.
    pub(crate) fn project_once<T: Any>(
        &self,
        resolve: impl FnOnce() -> Result<T, Failure>,
    ) -> Result<&T, Failure> {
        let kept = self
            .project
            .get_or_init(|| resolve().map(|value| Box::new(value) as Box<dyn Any>));
        match kept {
            Ok(value) => value.downcast_ref::<T>().ok_or_else(|| {
                Failure::environment("the project was kept as another type (a dreamkit bug)")
            }),
            Err(failure) => Err(failure.clone()),
        }
    }

    pub(super) fn stage(&self) -> Option<&'static dyn Stage> {
        self.stage
    }

    fn remember(&self, envelope: &Envelope) {
        *self.received.borrow_mut() = Some(envelope.clone());
        if let Some(stage) = self.stage {
            let envelope = envelope.clone();
            super::signals::set_documents(move |signal| {
                stage
                    .failed(envelope.clone(), &Failure::interrupted(signal))
                    .to_string()
            });
        }
    }
}

/// stdin's bytes: `None` when it is a terminal, closed (`<&-`) or `-n` was given; at most
/// [`MAX_STDIN_BYTES`] + 1 bytes are read (more is refused when parsed).
pub fn read_stdin(null_input: bool) -> Result<Option<Vec<u8>>, Failure> {
    let stdin = std::io::stdin();
    if null_input || stdin.is_terminal() {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    match stdin
        .lock()
        .take(MAX_STDIN_BYTES + 1)
        .read_to_end(&mut bytes)
    {
        Ok(_) => Ok(Some(bytes)),
        Err(e) if e.raw_os_error() == Some(libc::EBADF) => Ok(None),
        Err(e) => Err(Failure::environment(format!("cannot read stdin: {e}"))),
    }
}
