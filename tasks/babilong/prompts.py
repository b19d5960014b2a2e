"""BABILong's default prompts for qa1-qa10: the instruction, examples and post-prompt of the official
babilong/prompts.py (booydar/babilong, Apache-2.0), kept verbatim as prompt text (the protocol), not code."""

from __future__ import annotations

# (instruction, examples, post_prompt) per task, verbatim; the qa10 examples end in "<context>\n" there too
PROMPTS: dict[str, tuple[str, str, str]] = {
    "qa1": (
        'I will give you context with the facts about positions of different persons hidden in some '
        'random text and a question. You need to answer the question based only on the information from '
        'the facts. If a person was in different locations, use the latest location to answer the question.',
        '<example>\nCharlie went to the hallway. Judith come back to the kitchen. Charlie travelled to '
        'balcony. Where is Charlie?\nAnswer: The most recent location of Charlie is balcony.\n</example>\n\n<example>\nAlan '
        'moved to the garage. Charlie went to the beach. Alan went to the shop. Rouse travelled to balcony. '
        'Where is Alan?\nAnswer: The most recent location of Alan is shop.\n</example>',
        'Always return your answer in the following format: The most recent location of ’person’ is '
        '’location’. Do not write anything else after that.',
    ),
    "qa2": (
        'I give you context with the facts about locations and actions of different persons hidden in '
        'some random text and a question.You need to answer the question based only on the information '
        'from the facts.\nIf a person got an item in the first location and travelled to the second location '
        'the item is also in the second location. If a person dropped an item in the first location '
        'and moved to the second location the item remains in the first location.',
        '<example>\nCharlie went to the kitchen. Charlie got a bottle. Charlie moved to the balcony. '
        'Where is the bottle?\nAnswer: The bottle is in the balcony.\n</example>\n<example>\nAlan moved '
        'to the garage. Alan got a screw driver. Alan moved to the kitchen. Where is the screw driver?\nAnswer: '
        'The screw driver is in the kitchen.\n</example>',
        'Always return your answer in the following format: The ’item’ is in ’location’. Do not write '
        'anything else after that.',
    ),
    "qa3": (
        'I give you context with the facts about locations and actions of different persons hidden in '
        'some random text and a question. You need to answer the question based only on the information '
        'from the facts.\nIf a person got an item in the first location and travelled to the second location '
        'the item is also in the second location. If a person dropped an item in the first location '
        'and moved to the second location the item remains in the first location.',
        '<example>\nJohn journeyed to the bedroom. Mary grabbed the apple. Mary went back to the bathroom. '
        'Daniel journeyed to the bedroom. Daniel moved to the garden. Mary travelled to the kitchen. '
        'Where was the apple before the kitchen?\nAnswer: Before the kitchen the apple was in the bathroom.\n</example>\n<example>\nJohn '
        'went back to the bedroom. John went back to the garden. John went back to the kitchen. Sandra '
        'took the football. Sandra travelled to the garden. Sandra journeyed to the bedroom. Where was '
        'the football before the bedroom?\nAnswer: Before the bedroom the football was in the garden.\n</example>',
        'Always return your answer in the following format: Before the $location_1$ the $item$ was in '
        'the $location_2$. Do not write anything else after that.',
    ),
    "qa4": (
        'I will give you context with the facts about different people, their location and actions, '
        'hidden in some random text and a question. You need to answer the question based only on the '
        'information from the facts.',
        '<example>\nThe hallway is south of the kitchen. The bedroom is north of the kitchen. What is '
        'the kitchen south of?\nAnswer: bedroom\n</example>\n<example>\nThe garden is west of the bedroom. '
        'The bedroom is west of the kitchen. What is west of the bedroom?\nAnswer: garden\n</example>',
        'Your answer should contain only one word - location. Do not write anything else after that.',
    ),
    "qa5": (
        'I will give you context with the facts about locations and their relations hidden in some random '
        'text and a question. You need to answer the question based only on the information from the '
        'facts.',
        '<example>\nMary picked up the apple there. Mary gave the apple to Fred. Mary moved to the bedroom. '
        'Bill took the milk there. Who did Mary give the apple to?\nAnswer: Fred\n</example>\n<example>\nJeff '
        'took the football there. Jeff passed the football to Fred. Jeff got the milk there. Bill travelled '
        'to the bedroom. Who gave the football?\nAnswer: Jeff\n</example>\n<example>\nFred picked up the '
        'apple there. Fred handed the apple to Bill. Bill journeyed to the bedroom. Jeff went back to '
        'the garden. What did Fred give to Bill?\nAnswer: apple\n</example>',
        'Your answer should contain only one word. Do not write anything else after that. Do not explain '
        'your answer.',
    ),
    "qa6": (
        'I will give you context with the facts about people and their locations hidden in some random '
        'text and a question. You need to answer the question based only on the information from the '
        'facts. If a person was in different locations, use the latest location the person was in to '
        'answer the question.',
        '<example>\nJohn travelled to the hallway. John travelled to the garden. Is John in the garden?\nAnswer: '
        'yes\n</example>\n<example>\nMary went to the office. Daniel journeyed to the hallway. Mary went '
        'to the bedroom. Sandra went to the garden. Is Mary in the office?\nAnswer: no\n</example>\n',
        'Your answer should contain only one word - $yes$ or $no$. Do not write anything else after '
        'that. Do not explain your answer.',
    ),
    "qa7": (
        'I will give you context with the facts about people and objects they carry, hidden in some '
        'random text and a question. You need to answer the question based only on the information from '
        'the facts.',
        '<example>\nDaniel went to the bedroom. Daniel got the apple there. How many objects is Daniel '
        'carrying?\nAnswer: one\n</example>\n<example>\nMary grabbed the apple there. Mary gave the apple '
        'to John. How many objects is Mary carrying?\nAnswer: none\n</example>\n<example>\nSandra travelled '
        'to the hallway. Sandra picked up the milk there. Sandra took the apple there. Mary travelled '
        'to the garden. How many objects is Sandra carrying?\nAnswer: two\n</example>\n',
        'Your answer should contain only one word - $none$ or $number_of_objects$. Do not write anything '
        'else after that. Do not explain your answer.',
    ),
    "qa8": (
        'I will give you context with the facts about people and objects they carry, hidden in some '
        'random text and a question. You need to answer the question based only on the information from '
        'the facts.',
        '<example>\nSandra travelled to the garden. Mary grabbed the milk there. What is Mary carrying?\nAnswer: '
        'milk\n</example>\n<example>\nMary travelled to the kitchen. Sandra travelled to the office. John '
        'travelled to the office. Sandra discarded the milk there. What is Sandra carrying?\nAnswer: '
        'nothing\n</example>\n<example>\nDaniel grabbed the apple there. Mary went to the office. Daniel '
        'moved to the garden. Daniel grabbed the milk there. Mary went to the kitchen. What is Daniel '
        'carrying?\nAnswer: apple,milk\n</example>\n',
        'Your answer should contain only one or two words: $nothing$ or $object$ or $object_1$, $object_2$. '
        'Do not write anything else. Do not explain your answer.',
    ),
    "qa9": (
        'I will give you context with the facts about people and their locations hidden in some random '
        'text and a question. You need to answer the question based only on the information from the '
        'facts. If a person was in different locations, use the latest location the person was in to '
        'answer the question.',
        '<example>\nJohn is not in the bathroom. Sandra is not in the bedroom. Is John in the bathroom?\nAnswer: '
        'no\n</example>\n<example>\nMary journeyed to the kitchen. John is in the bedroom. Sandra is not '
        'in the garden. Is Mary in the kitchen?\nAnswer: yes\n</example>\n',
        'Your answer should contain only one word - $yes$ or $no$. Do not write anything else. Do not '
        'explain your answer.',
    ),
    "qa10": (
        'I will give you context with the facts about people and their locations hidden in some random '
        'text and a question. You need to answer the question based only on the information from the '
        'facts. If a person was in different locations, use the latest location the person was in to '
        'answer the question.',
        '<example>\nBill is in the kitchen. Julie is either in the school or the cinema. Is Bill in the '
        'bedroom?\nAnswer: no\n</example>\n<example>\nFred is in the bedroom. Mary is either in the school '
        'or the cinema. Is Mary in the school?\nAnswer: maybe\n</example>\n<example>\nFred is either in '
        'the kitchen or the park. Bill moved to the cinema. Is Bill in the cinema?\nAnswer: yes\n</example>\n<context>\n',
        'Your answer should contain only one word - $yes$ or $no$ or $maybe$. Do not write anything '
        'else. Do not explain your answer.',
    ),
}
