"""P(end) of short answers to a clerk's question, for semantic-text model files.

    python scripts/probe_short_answers.py OLD.npz NEW.npz

Written apart from the training templates (none of these questions is in
``scripts/train_semantic_text_v2.py``'s lists): bare phrases answering one
question (ends), open prefixes after the same questions (holds), requests
to hear it again ("wait what", "i missed that": ends), dates of birth,
times, counts and sums (whole: ends; cut inside a year or a sum: holds),
noun phrases paused after their modifier ("i'm looking for a cheap": holds)
beside finished turns ending on an adjective ("it was good": ends), an
affirmation after a clerk's check of the data ("yes" after "is it under
your email …?": ends) beside "yes" / "sure" after a request for it ("could
I get your phone number?": holds), the caller's own questions ("how soon
will it get here": ends) and the same stopped open ("how soon will":
holds), answers in forms the model reads unfinished (a past time after
"when did you change your phone number?", an option after "by email or by
post?", "april nine": ends; "the nine of": holds; data for them was tried
and not shipped, see the training script), reactions to an offer or news
("okay i can live with that", "oh that's slow": ends) and announcements of
more ("and one other thing": holds), a bare affirmation after an offer of
more ("oh yeah" after "anything else I can sort out for you?": holds) beside a
close or a yes with its request there (ends), a caller's problem or reason ("the
heater broke" after an open service line or a "why": ends; "someone used
my": holds), a question put indirectly ("can you tell me when you open on sunday": ends;
"can you tell me when", "do you know what time the gallery": holds), a short
answer by ellipsis to a yes/no question ("yes i do" after "Do you still have the
parcel with you?": ends; "i am" after "How can I help you?", "yes i do have": holds), and
bare phrases after an open "how can I help you?" (not labelled: printed to show how far the reading carries
over). Prints each P and, per model, the mean, the share at or above the
model's threshold and at or above 0.9. A probe for development, not a test
set: the published sets are ``scripts/eval_semantic_text.py``'s.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from turnkit.text.neural_model import NeuralTextModel

ENDS = [
    ("Which one would you like?", ["the first one", "the cheaper one", "the red one", "the second", "that one", "um the blue one"]),
    ("What area would you like to stay in?", ["the north", "the centre", "the east side", "downtown", "um the south"]),
    ("What's the problem with it?", ["the screen", "the battery", "the internet", "my password", "the bill", "the delivery", "the fridge"]),
    ("Who am I speaking with?", ["john", "the account holder", "his wife", "mary johnson", "it's karen"]),
    ("When would you like to come in?", ["the morning", "tomorrow", "next week", "the afternoon", "monday morning", "the twenty third"]),
    ("What would you like to order?", ["the chicken", "a pizza", "the usual", "two coffees", "the fish please"]),
    ("What kind of room?", ["a double", "the double room", "a single", "the suite"]),
    ("How would you like to pay?", ["the card", "by card", "cash", "the visa", "apple pay"]),
    ("Where are you calling from?", ["the office", "home", "the hospital", "london", "my car"]),
    ("What's your destination?", ["paris", "the airport", "new york city", "the train station"]),
    ("What did you want to ask about?", ["my order", "the return policy", "the opening hours", "um my account"]),
    ("Which department?", ["billing", "sales", "the technical team", "customer service"]),
    ("What time should I book it for?", ["seven", "around eight", "half past six", "the earliest one"]),
]  # fmt: skip
HOLDS = [
    ("What's the problem with it?", ["the", "um the", "my", "it's the", "the screen on the", "the battery and"]),
    ("When would you like to come in?", ["on", "um", "next", "the twenty", "at"]),
    ("Who am I speaking with?", ["it's", "um this is", "my name is"]),
    ("How can I help you?", ["i want to", "so the problem is", "hi", "yes hello", "i'm calling about", "the"]),
    ("What would you like to order?", ["i'll have the", "can i get a", "um the"]),
]  # fmt: skip
# The caller asks to hear it again, after lines of the agent's that are not
# in the training script (nor are these wordings in its _REPAIRS list).
REPAIRS = [
    ("Your refund was issued on the third.", ["sorry what did you say there", "wait what", "you said what", "what's that"]),
    ("The next available slot is at four fifteen.", ["i missed that", "didn't catch that sorry", "say what", "repeat that"]),
    ("Can you read me the serial number on the back?", ["sorry you cut out", "the what", "hang on what", "sorry could you repeat the last bit"]),
    ("Okay, and is this your mobile number?", ["pardon what was that", "what was the number", "eh", "sorry come again please"]),
]  # fmt: skip
# Dates of birth, times, counts and sums, after questions worded apart from
# the script's number_answer_examples lists: the whole answer (ends), and
# the answer cut inside a year or a sum (holds).
NUMBER_ENDS = [
    ("What's your date of birth?", ["march twelfth nineteen eighty four", "it's the fifth of june nineteen ninety", "uh june fifth two thousand one", "april third eighty seven", "oh four oh six eighty two"]),
    ("May I get your birth date?", ["july ninth nineteen seventy", "the second of may two thousand"]),
    ("What time works for you?", ["at three", "three thirty", "around seven", "seven pm"]),
    ("And how many of those?", ["two", "about twenty", "six please"]),
    ("What did they charge you?", ["forty nine ninety nine", "about two hundred dollars", "sixty bucks"]),
]  # fmt: skip
NUMBER_HOLDS = [
    ("What's your date of birth?", ["march twelfth nineteen", "the fifth of", "it's march", "uh june fifth two thousand and"]),
    ("May I get your birth date?", ["july ninth", "it's the second of may"]),
    ("What time works for you?", ["at", "around"]),
    ("What did they charge you?", ["a hundred and", "about"]),
]  # fmt: skip
# A pause inside a noun phrase, after its modifier (holds), and finished
# turns that end on an adjective or on a noun after one (ends).
MODIFIER_HOLDS = [
    ("How can I help you?", ["i'm looking for a cheap", "can you recommend a good", "i'd like an italian", "is there a nearby", "i need a quiet", "do you have any vegetarian", "i want the earliest", "i lost my blue", "i'd like to book a double", "we want a big", "i need a new", "can i get a large", "i'm trying to find a local", "is there a free", "i want to order a small"]),
    ("What kind of food would you like?", ["something with a spicy", "maybe a traditional", "i'd like a light"]),
    ("Anything else?", ["yes i also need a cheap", "could you find me a nice", "i need an expensive"]),
]  # fmt: skip
MODIFIER_ENDS = [
    ("How can I help you?", ["i'm looking for a cheap hotel", "can you recommend a good restaurant", "i'd like an italian place", "i need a quiet room", "i lost my blue wallet", "i'd like to book a double room", "i need a new password"]),
    ("How was everything?", ["it was good", "that's great", "really nice", "the room was clean", "everything was fine", "pretty good", "it was a bit expensive", "very good thanks"]),
    ("Would you like the cheaper one?", ["no the expensive one", "the cheap one", "the big one please", "yes the cheaper one"]),
    ("Is that all?", ["yes that's fine", "that sounds good", "perfect", "great thanks", "all good"]),
    ("What color is it?", ["blue", "it's black", "dark green"]),
]  # fmt: skip
# A check of the data (not a request for it): an affirmation is the turn.
CHECK_ENDS = [
    ("Is the order under the email address ending in gmail dot com?", ["yes", "yeah it is", "that's correct"]),
    ("Your account number is four five six. Is that right?", ["yes", "that's right", "yep"]),
    ("Is this the best number to reach you?", ["yes", "yeah it is"]),
    ("So that's the card ending in four two one one, correct?", ["yes", "correct"]),
    ("Okay, Wednesday afternoon. Same address as before?", ["yes", "yeah same one"]),
    ("I've got your zip as nine oh two one oh. Is that right?", ["yes", "yes that's right"]),
    ("And the surname is still Patel?", ["yes", "that's it"]),
]  # fmt: skip
# A request for the data in a yes/no form: "yes" / "sure" only starts the turn.
REQUEST_HOLDS = [
    ("Could I get your phone number?", ["yes", "sure", "okay"]),
    ("May I take your email address?", ["yes", "sure", "yeah"]),
    ("Can you give me the zip code?", ["sure", "yes", "okay"]),
    ("Could you please spell your last name?", ["sure", "yes"]),
    ("Can I have the order number, please?", ["yes", "sure"]),
]  # fmt: skip
# The caller's own question, a whole turn (ends), and the same questions
# stopped on an open word or their auxiliary (holds); worded apart from the
# script's caller_question_examples patterns, after agent lines not in it.
QUESTION_ENDS = [
    ("Your new card was posted yesterday.", ["how soon will it get here", "is delivery free", "has it been sent", "could i get a copy of the receipt", "why hasn't it shipped yet", "what if it gets lost"]),
    ("The store has a few left in stock.", ["do you deliver on sundays", "have you got it in blue", "can i get a discount", "is that with tax", "how late are you open", "where's the nearest branch"]),
    ("Your plan changes next month.", ["what's included in the plan", "is the price going up", "am i still covered", "how often do you bill", "what are the charges for that", "how would i go about cancelling"]),
    ("The next appointment is on the ninth.", ["any chance of something earlier", "how long will the visit last", "should i bring my insurance card", "who handles the paperwork", "which entrance do i use", "is there parking nearby"]),
    ("Sure.", ["how do refunds work", "when's the next train", "does the hotel have a pool", "which platform is it", "whose name is it under", "are there any seats left"]),
]  # fmt: skip
QUESTION_HOLDS = [
    ("Your new card was posted yesterday.", ["how soon will", "is delivery free for", "could i get a copy of the", "why hasn't it", "what if it"]),
    ("The store has a few left in stock.", ["do you deliver on", "have you got it in", "can i get a", "how late are", "where's the nearest"]),
    ("Your plan changes next month.", ["what's included in the", "am i still", "how often do", "what are the charges for", "how would i go about"]),
    ("Sure.", ["when's the next", "does the hotel have a", "which platform is", "are there any"]),
]  # fmt: skip
# The caller's reaction to an offer, a result or a piece of news (ends),
# and the caller announcing more to come (holds); worded apart from the
# script's reaction_examples lists, after agent lines not in it.
REACTION_ENDS = [
    ("The double room is ninety euros a night.", ["okay i can live with that", "hmm bit pricey", "oh that's a lot of money", "that's more than i expected", "reasonable enough"]),
    ("I can book you on the seven fifteen train. Shall I go ahead?", ["yeah do it", "please do", "okay book that one", "we'll go for that one", "yes we'll have that"]),
    ("All done, you're booked for Thursday.", ["oh great cheers", "awesome thank you", "that's all i needed", "thank you for your help", "amazing"]),
    ("There's a table available at eight.", ["eight is perfect", "eight o'clock is good", "good i'll come at eight", "hmm a bit late but okay"]),
    ("It should arrive in three to five days.", ["oh that's slow", "hmm quite a wait", "that's alright then", "okay good to hear"]),
    ("Your parcel went out this morning.", ["oh nice", "finally", "good news", "thank god", "oh that's quick"]),
    ("I can give you the blue one for the same price.", ["i'd go for the blue", "yes i accept", "ok we do that", "fine i take the blue", "no i prefer the red"]),
]  # fmt: skip
ANNOUNCE_HOLDS = [
    ("Anything else I can do for you?", ["and one other thing", "i also have a question", "oh there's another thing", "yeah i got another question", "and also i wanted to ask"]),
    ("Your account is all up to date.", ["what i'd like to know is", "so the issue is", "the other thing is", "my problem is", "okay and also one thing"]),
]  # fmt: skip
# After an offer of more, worded apart from the training lists
# (more_offer_examples; each line names the "else" field, the only way the
# model reads an offer of more): a bare affirmation (holds: the request is
# to come) and a refusal or close, or a yes with its request (ends).
MORE_YES_HOLDS = [
    ("Anything else I can sort out for you?", ["yeah sure", "oh yeah", "yes i have", "well actually yes", "um yes please"]),
    ("Is there something else you wanted today?", ["yes", "yeah um", "oh yes there's", "uh yeah", "yes actually"]),
    ("Would you like help with something else?", ["yes", "yeah", "mhm yes", "yes i would"]),
]  # fmt: skip
MORE_CLOSE_ENDS = [
    ("Anything else I can sort out for you?", ["no that's great cheers", "nah i'm good", "nothing more thanks", "that covers it", "no that's all sorted thank you"]),
    ("Is there something else you wanted today?", ["no", "no that's fine", "no all done thanks", "i'm okay thanks bye"]),
    ("Would you like help with something else?", ["yes i'd like to pay my bill", "yeah can you check my balance", "no thanks that's everything"]),
]  # fmt: skip
# A past time after a past-time question (one naming a field too: "in
# march" after "when did you change your phone number?" reads 0.01, the
# field read as a number being asked for), an option after a question
# offering two, a date with a cardinal day (ends), and that date cut before
# its day (holds). In no training list.
FORM_ENDS = [
    ("When did you last see the charge on your statement?", ["last friday", "the day before yesterday", "around noon yesterday", "a couple of days ago", "monday night"]),
    ("When did the phone stop working?", ["since sunday", "yesterday after lunch", "three days back", "this week"]),
    ("When was the last time you ordered from us?", ["in january", "maybe last summer", "a month ago", "never before"]),
    ("When did you change your phone number?", ["last year", "a few weeks ago", "in march", "this summer"]),
    ("Okay. And when did you open the account?", ["twenty nineteen", "about two years ago", "in the spring"]),
    ("Would you like the aisle seat or the middle seat?", ["aisle", "the aisle one please", "middle is fine"]),
    ("Do you want it delivered or will you pick it up?", ["delivered please", "i'll pick it up", "pick up"]),
    ("Should I send it by email or by post?", ["by email", "email is better", "post please"]),
    ("Is this for business or personal use?", ["personal", "business", "it's for business"]),
    ("What day do you want to travel?", ["april nine", "the nine of april", "june twenty three"]),
    ("Which date suits you?", ["october four", "the four of october"]),
]  # fmt: skip
FORM_HOLDS = [
    ("What day do you want to travel?", ["april", "the nine of", "june twenty"]),
    ("Which date suits you?", ["october", "on the"]),
    ("When did the phone stop working?", ["since", "yesterday after"]),
]  # fmt: skip
# A caller stating their problem or reason, after an open service line or a
# "why" (ends), and the same stopped open (holds). Agent lines, subjects and
# verbs apart from problem_examples' lists.
PROBLEM_ENDS = [
    ("Good afternoon, customer care, how may I assist?", ["my luggage didn't show up", "my ticket got refused", "the heater broke", "my transfer bounced", "um my parcel went missing"]),
    ("Hello, you're through to the help desk.", ["the engineer didn't turn up", "my direct debit failed", "hi someone used my card", "my login doesn't work"]),
    ("What's the issue?", ["the bank blocked my transfer", "the screen cracked", "my appointment got moved", "i got the wrong item"]),
    ("Why are you sending it back?", ["it came too late", "it's the wrong colour", "the zip broke", "we changed our minds"]),
    ("And why do you need to change the date?", ["my son got sick", "the hotel overbooked us", "work came up", "my visa got delayed"]),
    ("So what went wrong?", ["we had no hot water", "the courier lost it", "the driver got lost", "nobody picked up the phone"]),
]  # fmt: skip
PROBLEM_HOLDS = [
    ("Good afternoon, customer care, how may I assist?", ["my luggage didn't", "someone used my", "the bank blocked my"]),
    ("What's the issue?", ["the engineer didn't turn", "i got the wrong", "the heater is making a"]),
    ("Why are you sending it back?", ["it's the wrong", "because the"]),
]  # fmt: skip
# A caller's question put indirectly, inside a request ("can you tell me
# when you open on sunday", "do you know if ...": ends), and the same
# stopped after its frame, its wh-word or its subject ("can you tell me
# when", "do you know what time the gallery": holds). Frames, clauses and
# agent lines apart from indirect_question_examples' lists.
INDIRECT_ENDS = [
    ("Hi, thanks for calling the city museum.", ["can you tell me when you open on sunday", "i wanted to check if you're open today", "do you know what time the gallery shuts", "could you tell me how much tickets are", "i'd like to find out whether kids go free"]),
    ("Good morning, reservations.", ["i was hoping you could tell me if there's a room tonight", "can you check whether breakfast is included", "do you know how far the hotel is from the station", "could you let me know what the cancellation policy is"]),
    ("The technician is booked for Friday.", ["can you tell me what time he's coming", "do you know how long the repair takes", "could you find out if he'll call first", "i'd like to know who's coming"]),
    ("Your order is in our system.", ["can you see when it was dispatched", "any idea when it'll turn up", "could you check where my parcel is", "i'm not sure what i ordered"]),
    ("Sure.", ["tell me when the shop closes", "i wonder if you could help me", "let me know how much i owe", "do you know which bus goes there"]),
]  # fmt: skip
INDIRECT_HOLDS = [
    ("Hi, thanks for calling the city museum.", ["can you tell me when", "i wanted to check if", "do you know what time the gallery", "could you tell me how much"]),
    ("Good morning, reservations.", ["can you check whether", "do you know how far the", "i was hoping you could tell me if there's"]),
    ("The technician is booked for Friday.", ["can you tell me what time he's", "could you find out if he'll"]),
    ("Your order is in our system.", ["can you see when it", "could you check where my", "any idea when"]),
]  # fmt: skip
# A short answer by ellipsis to a yes/no question ("yes i do" after "Do
# you ...?": ends), and the same words after an open line or going on past
# the auxiliary (holds); questions worded apart from the script's
# ellipsis_answer_examples lists (and from the demo's and the eval sets').
ELLIPSIS_ENDS = [
    ("Do you still have the parcel with you?", ["yes i do", "yeah i do", "no i don't", "i do"]),
    ("Are you the account holder?", ["yes i am", "i am", "no i'm not", "yeah i am thanks"]),
    ("Is this the address on file?", ["yes it is", "no it isn't", "it is"]),
    ("Can you see the green light on the modem?", ["yes i can", "no i can't", "i can yeah"]),
    ("Have you used the card since the charge?", ["yes i have", "no i haven't", "i have"]),
    ("Will you be at home on Thursday?", ["yes i will", "no i won't"]),
    ("Were you charged twice for it?", ["yes we were", "yes i was", "no we weren't"]),
    ("Did you receive a shipping notice?", ["i did", "yes i did", "no i didn't"]),
    ("Does the form ask for a reference?", ["yes it does", "no it doesn't"]),
    ("Has your husband signed the contract?", ["yes he has", "no he hasn't"]),
    ("Would you like me to email the invoice?", ["yes i would", "i would thanks"]),
]  # fmt: skip
ELLIPSIS_HOLDS = [
    ("How can I help you?", ["i am", "i do", "it is", "i have", "we were"]),
    ("What seems to be the trouble with it?", ["it is", "it was", "it does", "i can"]),
    ("Do you still have the parcel with you?", ["yes i do have", "yes i", "i do need"]),
    ("Is this the address on file?", ["yes it is the", "it is on"]),
]  # fmt: skip
OPEN = [
    ("How can I help you?", ["the screen", "my bill", "my internet", "the delivery", "a refund", "my order"]),
    ("What can I do for you today?", ["the screen", "my bill", "a refund"]),
]  # fmt: skip


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    models = [NeuralTextModel.from_file(p) for p in sys.argv[1:]]
    sections = (
        ("ends", ENDS),
        ("holds", HOLDS),
        ("asks to hear it again (ends)", REPAIRS),
        ("dates, times, counts and sums (ends)", NUMBER_ENDS),
        ("dates, times, counts and sums cut short (holds)", NUMBER_HOLDS),
        ("a noun phrase paused after its modifier (holds)", MODIFIER_HOLDS),
        ("finished on an adjective, or a noun after one (ends)", MODIFIER_ENDS),
        ("an affirmation after a check of the data (ends)", CHECK_ENDS),
        ("'yes' / 'sure' after a request for the data (holds)", REQUEST_HOLDS),
        ("the caller's own question (ends)", QUESTION_ENDS),
        ("the caller's question stopped open (holds)", QUESTION_HOLDS),
        ("a reaction to an offer or news (ends)", REACTION_ENDS),
        ("an announcement of more to come (holds)", ANNOUNCE_HOLDS),
        ("a bare yes after an offer of more (holds)", MORE_YES_HOLDS),
        ("a close, or a yes with its request, after an offer of more (ends)", MORE_CLOSE_ENDS),
        ("a past time, an option, a date with a cardinal day (ends)", FORM_ENDS),
        ("the date or time cut short (holds)", FORM_HOLDS),
        ("a caller's problem or reason stated (ends)", PROBLEM_ENDS),
        ("the problem stopped open (holds)", PROBLEM_HOLDS),
        ("a question put indirectly (ends)", INDIRECT_ENDS),
        ("the indirect question stopped open (holds)", INDIRECT_HOLDS),
        ("a short answer by ellipsis to a yes/no question (ends)", ELLIPSIS_ENDS),
        ("its words after an open line, or going on (holds)", ELLIPSIS_HOLDS),
        ("after an open question", OPEN),
    )
    for title, rows in sections:
        print(f"== {title}")
        ps = []
        for agent, texts in rows:
            for text in texts:
                ps.append([m.predict(text, agent) for m in models])
                print("  " + " ".join(f"{p:.2f}" for p in ps[-1]), f"  {text} || {agent}")
        a = np.array(ps)
        share = [(a[:, i] >= m.threshold).mean() for i, m in enumerate(models)]
        print(
            f"  n={len(a)}  mean "
            + " ".join(f"{x:.2f}" for x in a.mean(0))
            + "  at or above threshold "
            + " ".join(f"{x:.0%}" for x in share)
            # fused answers at its floor from about here (its eager level)
            + "  at or above 0.9 "
            + " ".join(f"{x:.0%}" for x in (a >= 0.9).mean(0))
        )


if __name__ == "__main__":
    main()
