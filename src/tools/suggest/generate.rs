//! The one model request: the recent conversation, no tools, asking for what the user would
//! naturally type next.

use crate::model::Request;

/// Room for 12 words and a wrapper; the answer must stay small.
pub const MAX_TOKENS: u32 = 64;

pub const SYSTEM_PROMPT: &str = "You predict the next message a person will type to their \
coding assistant, from the conversation so far. Look at what the user asked, how they write, \
and what the assistant just said. Suggest what they would naturally type next: 2 to 12 words, \
in their own style and language (as terse, casual or lower-case as they are). A one-word reply \
such as yes, push or a /command is fine when it is what they would type. Write as the user, \
not as the assistant: no thanks or praise, nothing like \"Let me\" or \"I'll\", one sentence, \
no explanation, no quotes, no label, no markdown. If nothing obvious comes next, reply with \
nothing at all.";

pub fn request(messages: &[String]) -> Request {
    let conversation = messages.join("\n\n");
    Request::one_shot(
        SYSTEM_PROMPT,
        format!(
            "The conversation so far, oldest first:\n\n{conversation}\n\nWhat would the \
                 user type next? Reply with the suggestion only, or with nothing."
        ),
        MAX_TOKENS,
    )
}
