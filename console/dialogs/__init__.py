"""The console's dialogs: yes/no and choice questions (``confirm``) and one-line input
(``prompt``). They import nothing of the console: any screen or widget may ask one."""
